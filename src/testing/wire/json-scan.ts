/**
 * JSON as Go's encoding/json scans it, over the request's raw bytes. Both gateways (3.4's v1 with jsonpb, 3.5's
 * v2 with protojson) first read each request with a json.Decoder into a json.RawMessage, so the framing rules and
 * the syntax error texts are Go's: "unexpected EOF", "invalid character 'x' looking for beginning of value", and
 * trailing data after the first value is never read. Nodes keep byte offsets, so decoders can quote raw text and
 * report positions as Go does.
 */

export type JsonNode =
  | { readonly kind: "object"; readonly start: number; readonly end: number; readonly members: readonly JsonMember[] }
  | { readonly kind: "array"; readonly start: number; readonly end: number; readonly items: readonly JsonNode[] }
  | { readonly kind: "string" | "number" | "true" | "false" | "null"; readonly start: number; readonly end: number };

export interface JsonMember {
  /** The name's string token (quotes included in [start, end)). */
  readonly name: JsonNode;
  readonly value: JsonNode;
}

/** A syntax error with Go's wording; `unexpectedEnd` marks input that stopped inside a value. */
export class JsonSyntaxError extends Error {
  constructor(
    message: string,
    readonly unexpectedEnd = false,
  ) {
    super(message);
    this.name = "JsonSyntaxError";
  }
}

const isSpace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const isHex = (c: number) => isDigit(c) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46);

/** Go's quoteChar: how a scanner error names the offending byte. */
function quoteChar(c: number): string {
  if (c === 0x27) return "'\\''";
  if (c === 0x22) return "'\"'";
  const named: Record<number, string> = {
    7: "\\a",
    8: "\\b",
    9: "\\t",
    10: "\\n",
    11: "\\v",
    12: "\\f",
    13: "\\r",
    92: "\\\\",
  };
  if (named[c] !== undefined) return `'${named[c]}'`;
  if (c < 0x20 || c === 0x7f) return `'\\x${c.toString(16).padStart(2, "0")}'`;
  // A byte >= 0x80 is quoted as the rune U+00XX; Go prints the non-printable ones as escapes.
  if ((c >= 0x80 && c <= 0xa0) || c === 0xad) return `'\\u00${c.toString(16).padStart(2, "0")}'`;
  return `'${String.fromCharCode(c)}'`;
}

class Scanner {
  pos: number;

  constructor(
    readonly bytes: Uint8Array,
    start: number,
    /** json.Unmarshal says "unexpected end of JSON input" where a Decoder says "unexpected EOF". */
    private readonly endMessage: string,
  ) {
    this.pos = start;
  }

  private fail(context: string): never {
    if (this.pos >= this.bytes.length) throw new JsonSyntaxError(this.endMessage, true);
    throw new JsonSyntaxError(`invalid character ${quoteChar(this.bytes[this.pos] as number)} ${context}`);
  }

  private peek(): number {
    return this.pos < this.bytes.length ? (this.bytes[this.pos] as number) : -1;
  }

  skipSpace(): void {
    while (this.pos < this.bytes.length && isSpace(this.bytes[this.pos] as number)) this.pos++;
  }

  value(): JsonNode {
    this.skipSpace();
    const start = this.pos;
    const c = this.peek();
    if (c === 0x7b) return this.object(start);
    if (c === 0x5b) return this.array(start);
    if (c === 0x22) return this.string();
    if (c === 0x2d || isDigit(c)) return this.number(start);
    if (c === 0x74) return this.literal(start, "true");
    if (c === 0x66) return this.literal(start, "false");
    if (c === 0x6e) return this.literal(start, "null");
    return this.fail("looking for beginning of value");
  }

  private object(start: number): JsonNode {
    this.pos++;
    const members: JsonMember[] = [];
    this.skipSpace();
    if (this.peek() === 0x7d) {
      this.pos++;
      return { kind: "object", start, end: this.pos, members };
    }
    for (;;) {
      this.skipSpace();
      if (this.peek() !== 0x22) this.fail("looking for beginning of object key string");
      const name = this.string();
      this.skipSpace();
      if (this.peek() !== 0x3a) this.fail("after object key");
      this.pos++;
      members.push({ name, value: this.value() });
      this.skipSpace();
      const c = this.peek();
      this.pos++;
      if (c === 0x2c) continue;
      if (c === 0x7d) return { kind: "object", start, end: this.pos, members };
      this.pos--;
      this.fail("after object key:value pair");
    }
  }

  private array(start: number): JsonNode {
    this.pos++;
    const items: JsonNode[] = [];
    this.skipSpace();
    if (this.peek() === 0x5d) {
      this.pos++;
      return { kind: "array", start, end: this.pos, items };
    }
    for (;;) {
      items.push(this.value());
      this.skipSpace();
      const c = this.peek();
      this.pos++;
      if (c === 0x2c) continue;
      if (c === 0x5d) return { kind: "array", start, end: this.pos, items };
      this.pos--;
      this.fail("after array element");
    }
  }

  private string(): JsonNode {
    const start = this.pos++;
    for (;;) {
      const c = this.peek();
      if (c === 0x22) {
        this.pos++;
        return { kind: "string", start, end: this.pos };
      }
      if (c === 0x5c) {
        this.pos++;
        const e = this.peek();
        if (e === 0x75) {
          this.pos++;
          for (let i = 0; i < 4; i++, this.pos++)
            if (!isHex(this.peek())) this.fail("in \\u hexadecimal character escape");
          continue;
        }
        // b f n r t \ / "
        if (![0x62, 0x66, 0x6e, 0x72, 0x74, 0x5c, 0x2f, 0x22].includes(e)) this.fail("in string escape code");
        this.pos++;
        continue;
      }
      if (c < 0x20) this.fail("in string literal");
      this.pos++;
    }
  }

  private number(start: number): JsonNode {
    if (this.peek() === 0x2d) {
      this.pos++;
      if (!isDigit(this.peek())) this.fail("in numeric literal");
    }
    if (this.peek() === 0x30) this.pos++;
    else while (isDigit(this.peek())) this.pos++;
    if (this.peek() === 0x2e) {
      this.pos++;
      if (!isDigit(this.peek())) this.fail("after decimal point in numeric literal");
      while (isDigit(this.peek())) this.pos++;
    }
    if (this.peek() === 0x65 || this.peek() === 0x45) {
      this.pos++;
      if (this.peek() === 0x2b || this.peek() === 0x2d) this.pos++;
      if (!isDigit(this.peek())) this.fail("in exponent of numeric literal");
      while (isDigit(this.peek())) this.pos++;
    }
    return { kind: "number", start, end: this.pos };
  }

  private literal(start: number, word: "true" | "false" | "null"): JsonNode {
    this.pos++;
    for (let i = 1; i < word.length; i++, this.pos++) {
      if (this.peek() !== word.charCodeAt(i)) this.fail(`in literal ${word} (expecting '${word[i]}')`);
    }
    return { kind: word, start, end: this.pos };
  }
}

/**
 * The next value of a request stream, as json.Decoder.Decode into a json.RawMessage reads it: undefined when only
 * whitespace is left (io.EOF), else the value and the offset after it. Whatever follows is not looked at.
 */
export function readValue(bytes: Uint8Array, offset = 0): { node: JsonNode; next: number } | undefined {
  const s = new Scanner(bytes, offset, "unexpected EOF");
  s.skipSpace();
  if (s.pos >= bytes.length) return undefined;
  const node = s.value();
  return { node, next: s.pos };
}

/** A whole document, as json.Unmarshal checks it: trailing non-space is an error. */
export function parseDocument(bytes: Uint8Array): JsonNode {
  const s = new Scanner(bytes, 0, "unexpected end of JSON input");
  const node = s.value();
  s.skipSpace();
  if (s.pos < bytes.length) {
    throw new JsonSyntaxError(`invalid character ${quoteChar(bytes[s.pos] as number)} after top-level value`);
  }
  return node;
}

const utf8 = new TextDecoder();

/** The node's source text (UTF-8), as Go prints a raw token. */
export function rawText(bytes: Uint8Array, node: JsonNode): string {
  return utf8.decode(bytes.subarray(node.start, node.end));
}

/**
 * The raw bytes between a string token's quotes, escapes untouched (jsonpb 1.3 reads enum
 * names and quoted numbers so).
 */
export function innerBytes(bytes: Uint8Array, node: JsonNode): Uint8Array {
  return bytes.subarray(node.start + 1, node.end - 1);
}

/** ASCII-only view for small tokens (numbers, enum names); other bytes map one-to-one. */
export function asciiText(bytes: Uint8Array): string {
  return String.fromCharCode(...bytes);
}

/** A string token's value as bytes, with Go's unquoting: escapes resolved, bad surrogates and bad UTF-8 as U+FFFD. */
export function stringBytes(bytes: Uint8Array, node: JsonNode): Uint8Array {
  const text = utf8.decode(bytes.subarray(node.start + 1, node.end - 1));
  if (!text.includes("\\")) return new TextEncoder().encode(text);
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const ch = text[i] as string;
    if (ch !== "\\") {
      out += ch;
      continue;
    }
    const e = text[++i] as string;
    if (e !== "u") {
      out += { b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" }[e] ?? e;
      continue;
    }
    let unit = parseInt(text.slice(i + 1, i + 5), 16);
    i += 4;
    if (unit >= 0xd800 && unit < 0xdc00) {
      const low = text.startsWith("\\u", i + 1) ? parseInt(text.slice(i + 3, i + 7), 16) : -1;
      if (low >= 0xdc00 && low < 0xe000) {
        out += String.fromCharCode(unit, low);
        i += 6;
        continue;
      }
      unit = 0xfffd;
    } else if (unit >= 0xdc00 && unit < 0xe000) {
      unit = 0xfffd;
    }
    out += String.fromCharCode(unit);
  }
  return new TextEncoder().encode(out);
}

/** 1-based line and column (in runes) of a byte offset, as protojson reports positions. */
export function position(bytes: Uint8Array, offset: number): { line: number; column: number } {
  let line = 1;
  let column = 1;
  for (let i = 0; i < offset && i < bytes.length; i++) {
    const b = bytes[i] as number;
    if (b === 0x0a) {
      line++;
      column = 1;
    } else if ((b & 0xc0) !== 0x80) {
      column++;
    }
  }
  return { line, column };
}
