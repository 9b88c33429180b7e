import { Base64Error, decodeGoBase64, protojsonVariant } from "./base64.js";
import { DecodeError } from "./errors.js";
import { asciiText, position, rawText, stringBytes, type JsonNode } from "./json-scan.js";
import { newMsg, type Msg, type Value } from "./message.js";
import type { FieldDesc, MessageDesc } from "./schema.js";

/**
 * The gateway decoder of etcd 3.5 and later: protobuf-go's protojson with DiscardUnknown, over the first JSON value
 * of the body.
 * Fields in document order, duplicates and a second oneof member refused, numbers accepted in any JSON spelling
 * that is an exact integer ("1e2", "2.0", as text too), bytes in std or URL base64 with or without padding,
 * unknown enum names ignored. Errors carry the value's line:column, as "proto: (line 1:8): invalid value ...".
 */
export function decodeProtojson(text: Uint8Array, node: JsonNode, type: MessageDesc): Msg {
  return new ProtojsonDecoder(text).message(node, type);
}

const utf8 = new TextDecoder();

/**
 * protobuf-go prefixes its errors with "proto:" and a space it picks per binary, to discourage matching on error
 * text: Debian's etcd 3.5.16 build uses a no-break space (U+00A0), so the mock does.
 */
const PROTO = "proto:\u00a0";
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const INT32_MIN = -(2n ** 31n);
const INT32_MAX = 2n ** 31n - 1n;

/** The token protojson names in errors: "{" and "[" for containers, the source text otherwise. */
function tokenText(text: Uint8Array, node: JsonNode): string {
  if (node.kind === "object") return "{";
  if (node.kind === "array") return "[";
  return rawText(text, node);
}

const NUMBER = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;

/**
 * protojson's normalizeToIntString: the integer a JSON number denotes, if it is an exact
 * integer of at most 20 digits.
 */
export function exactInteger(literal: string): bigint | undefined {
  const m = NUMBER.exec(literal);
  if (!m) return undefined;
  const neg = literal.startsWith("-");
  const intp = m[1] === "0" ? "" : (m[1] as string);
  const frac = (m[2] ?? "").slice(1).replace(/0+$/, "");
  const expText = m[3]?.slice(1) ?? "";
  if (intp === "" && frac === "") return 0n;
  const exp = expText === "" ? 0 : Number(expText);
  if (!Number.isSafeInteger(exp) || Math.abs(exp) > 2 ** 31 - 1) return undefined;
  let digits: string;
  if (exp >= 0) {
    if (frac.length > exp || intp.length + exp > 20) return undefined;
    digits = intp + frac + "0".repeat(exp - frac.length);
  } else {
    if (frac.length > 0) return undefined;
    const index = intp.length + exp;
    if (index < 0 || /[^0]/.test(intp.slice(index))) return undefined;
    digits = intp.slice(0, index);
  }
  const n = BigInt(digits === "" ? "0" : digits);
  return neg ? -n : n;
}

class ProtojsonDecoder {
  constructor(private readonly text: Uint8Array) {}

  private at(node: JsonNode): string {
    const { line, column } = position(this.text, node.start);
    return `(line ${line}:${column})`;
  }

  private unexpected(node: JsonNode): DecodeError {
    return new DecodeError(`${PROTO}syntax error ${this.at(node)}: unexpected token ${tokenText(this.text, node)}`);
  }

  private invalid(node: JsonNode, f: FieldDesc): DecodeError {
    const kind = f.kind === "message" ? "message" : f.kind;
    return new DecodeError(
      `${PROTO}${this.at(node)}: invalid value for ${kind} field ${f.json}: ${tokenText(this.text, node)}`,
    );
  }

  message(node: JsonNode, type: MessageDesc): Msg {
    if (node.kind !== "object") throw this.unexpected(node);
    const msg = newMsg(type);
    const seen = new Set<number>();
    const seenOneofs = new Set<string>();
    for (const member of node.members) {
      const name = utf8.decode(stringBytes(this.text, member.name));
      const f = type.fields.find((x) => x.json === name) ?? type.fields.find((x) => x.name === name);
      if (!f) continue;
      const nameText = rawText(this.text, member.name);
      if (seen.has(f.number)) throw new DecodeError(`${PROTO}${this.at(member.name)}: duplicate field ${nameText}`);
      seen.add(f.number);
      if (member.value.kind === "null") continue;
      if (f.oneof) {
        if (seenOneofs.has(f.oneof)) {
          throw new DecodeError(
            `${PROTO}${this.at(member.name)}: error parsing ${nameText}, oneof ${f.oneof} is already set`,
          );
        }
        seenOneofs.add(f.oneof);
      }
      const value = this.field(member.value, f);
      if (value !== undefined) msg.fields.set(f.name, value);
    }
    return msg;
  }

  private field(node: JsonNode, f: FieldDesc): Value | undefined {
    if (!f.repeated) return this.single(node, f);
    if (node.kind !== "array") throw this.unexpected(node);
    const out: Value[] = [];
    for (const item of node.items) {
      const v = this.single(item, f);
      if (v !== undefined) out.push(v);
    }
    return out;
  }

  private single(node: JsonNode, f: FieldDesc): Value | undefined {
    switch (f.kind) {
      case "message":
        return this.message(node, f.message!());
      case "bool":
        if (node.kind === "true" || node.kind === "false") return node.kind === "true";
        break;
      case "string":
        if (node.kind === "string") return utf8.decode(stringBytes(this.text, node));
        break;
      case "int64":
      case "uint64": {
        const n = this.integer(node);
        const [min, max] = f.kind === "int64" ? [INT64_MIN, INT64_MAX] : [0n, 2n ** 64n - 1n];
        if (n !== undefined && n >= min && n <= max) return n;
        break;
      }
      case "enum": {
        if (node.kind === "string") {
          const i = f.enumType!.values.indexOf(utf8.decode(stringBytes(this.text, node)));
          // DiscardUnknown: an unknown name leaves the field unset.
          return i < 0 ? undefined : i;
        }
        if (node.kind === "number") {
          const n = exactInteger(asciiText(this.text.subarray(node.start, node.end)));
          if (n !== undefined && n >= INT32_MIN && n <= INT32_MAX) return Number(n);
        }
        break;
      }
      case "bytes": {
        if (node.kind !== "string") break;
        const s = stringBytes(this.text, node);
        try {
          return decodeGoBase64(s, protojsonVariant(s));
        } catch (err) {
          if (!(err instanceof Base64Error)) throw err;
        }
        break;
      }
    }
    throw this.invalid(node, f);
  }

  /** A number token, or a string holding exactly one number token (no surrounding space). */
  private integer(node: JsonNode): bigint | undefined {
    if (node.kind === "number") return exactInteger(asciiText(this.text.subarray(node.start, node.end)));
    if (node.kind !== "string") return undefined;
    return exactInteger(utf8.decode(stringBytes(this.text, node)));
  }
}
