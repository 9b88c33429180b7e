/**
 * Go's encoding/base64 decoder, ported for its error offsets: 3.4's gateway decodes bytes fields with
 * StdEncoding (padded; "illegal base64 data at input byte N"), 3.5's protojson picks std or URL alphabet and
 * padded or not from the text. Newlines are skipped, as Go does.
 */

const STD = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

function decodeMap(alphabet: string): Int16Array {
  const map = new Int16Array(256).fill(-1);
  for (let i = 0; i < alphabet.length; i++) map[alphabet.charCodeAt(i)] = i;
  return map;
}

const STD_MAP = decodeMap(STD);
const URL_MAP = decodeMap(URL);

export interface Base64Variant {
  readonly url: boolean;
  readonly padded: boolean;
}

/** Go's CorruptInputError: the offset of the first byte that made the input invalid. */
export class Base64Error extends Error {
  constructor(readonly offset: number) {
    super(`illegal base64 data at input byte ${offset}`);
    this.name = "Base64Error";
  }
}

const isNewline = (c: number | undefined) => c === 0x0a || c === 0x0d;

/** Decodes like Go's Encoding.Decode; throws Base64Error. */
export function decodeGoBase64(src: Uint8Array, variant: Base64Variant = { url: false, padded: true }): Uint8Array {
  const map = variant.url ? URL_MAP : STD_MAP;
  const out: number[] = [];
  let si = 0;
  while (si < src.length) {
    // One quantum: up to four symbols, newlines skipped (decodeQuantum).
    const dbuf = [0, 0, 0, 0];
    let dlen = 4;
    let trailingError = -1;
    let j = 0;
    for (; j < 4; j++) {
      if (si === src.length) {
        if (j === 0) return Uint8Array.from(out);
        if (j === 1 || variant.padded) throw new Base64Error(si - j);
        dlen = j;
        break;
      }
      const c = src[si] as number;
      si++;
      const v = map[c] as number;
      if (v >= 0) {
        dbuf[j] = v;
        continue;
      }
      if (isNewline(c)) {
        j--;
        continue;
      }
      if (!variant.padded || c !== 0x3d) throw new Base64Error(si - 1);
      // Padding: only after two or three symbols, "==" after two.
      if (j === 0 || j === 1) throw new Base64Error(si - 1);
      if (j === 2) {
        while (si < src.length && isNewline(src[si])) si++;
        if (si === src.length) throw new Base64Error(src.length);
        if (src[si] !== 0x3d) throw new Base64Error(si - 1);
        si++;
      }
      while (si < src.length && isNewline(src[si])) si++;
      if (si < src.length) trailingError = si;
      dlen = j;
      break;
    }
    const val =
      ((dbuf[0] as number) << 18) | ((dbuf[1] as number) << 12) | ((dbuf[2] as number) << 6) | (dbuf[3] as number);
    const bytes = [(val >> 16) & 0xff, (val >> 8) & 0xff, val & 0xff];
    out.push(...bytes.slice(0, dlen - 1));
    if (trailingError >= 0) throw new Base64Error(trailingError);
  }
  return Uint8Array.from(out);
}

/** protojson's choice of encoding for a bytes field: URL alphabet if it has - or _, unpadded if length % 4 != 0. */
export function protojsonVariant(text: Uint8Array): Base64Variant {
  return { url: text.some((c) => c === 0x2d || c === 0x5f), padded: text.length % 4 === 0 };
}
