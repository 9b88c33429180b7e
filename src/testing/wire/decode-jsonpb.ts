import { Base64Error, decodeGoBase64 } from "./base64.js";
import { DecodeError, DroppedConnection } from "./errors.js";
import { asciiText, innerBytes, JsonSyntaxError, parseDocument, stringBytes, type JsonNode } from "./json-scan.js";
import { newMsg, type Msg, type Value } from "./message.js";
import type { FieldDesc, MessageDesc } from "./schema.js";

/**
 * etcd 3.4's gateway decoder: golang/protobuf 1.3's jsonpb over encoding/json. Each field's raw JSON goes through
 * json.Unmarshal into the Go field, so errors read "json: cannot unmarshal number 1e2 into Go value of type int64".
 * Fields are read in declaration order (oneof members last, in a random order: see oneofWalk), unknown fields are
 * ignored, the lowerCamel name wins over the proto name, a quoted number is unquoted without unescaping, and bytes
 * take base64 or a byte array.
 */
export function decodeJsonpb(text: Uint8Array, node: JsonNode, type: MessageDesc): Msg {
  const decoder = new JsonpbDecoder(text);
  const msg = decoder.message(node, type);
  // Decoding succeeds; marshalling the nil element for the gRPC call then panics in the gateway.
  if (decoder.nullElement) throw new DroppedConnection(`null element in ${decoder.nullElement}`);
  return msg;
}

const utf8 = new TextDecoder();
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;
const INT32_MIN = -(2n ** 31n);
const INT32_MAX = 2n ** 31n - 1n;

/** How encoding/json names a JSON value's kind in "cannot unmarshal X into ...". */
function jsonKind(node: JsonNode): string {
  switch (node.kind) {
    case "object":
    case "array":
    case "string":
    case "number":
      return node.kind;
    case "true":
    case "false":
      return "bool";
    case "null":
      return "null";
  }
}

const typeError = (what: string, goType: string) =>
  new DecodeError(`json: cannot unmarshal ${what} into Go value of type ${goType}`);

/** Go's strconv.Quote of raw bytes, as jsonpb's "unknown value %q" prints an enum name. */
function goQuote(raw: Uint8Array): string {
  const text = utf8.decode(raw);
  return JSON.stringify(text).replace(/\\u007f/g, "\\x7f");
}

class JsonpbDecoder {
  /** A repeated message field that got a null element, if any. */
  nullElement: string | undefined;

  constructor(private readonly text: Uint8Array) {}

  message(node: JsonNode, type: MessageDesc): Msg {
    const msg = newMsg(type);
    if (node.kind === "null") return msg;
    if (node.kind !== "object") throw typeError(jsonKind(node), "map[string]json.RawMessage");
    const byName = new Map<string, JsonNode>();
    for (const m of node.members) byName.set(utf8.decode(stringBytes(this.text, m.name)), m.value);
    const consume = (f: FieldDesc): JsonNode | undefined => byName.get(f.json) ?? byName.get(f.name);
    const ordered = [...type.fields.filter((f) => !f.oneof), ...oneofWalk(type.fields.filter((f) => f.oneof))];
    for (const f of ordered) {
      const raw = consume(f);
      if (raw === undefined) continue;
      const value = this.field(raw, f);
      // A oneof holds the last member set: setting one replaces any other (null sets none).
      if (f.oneof) for (const other of type.fields) if (other.oneof === f.oneof) msg.fields.delete(other.name);
      if (value !== undefined) msg.fields.set(f.name, value);
    }
    return msg;
  }

  /** One field's raw value into its Go type; undefined leaves it unset (null). */
  private field(node: JsonNode, f: FieldDesc): Value | undefined {
    if (node.kind === "null") return undefined;
    if (f.repeated) {
      if (node.kind !== "array") throw typeError(jsonKind(node), "[]json.RawMessage");
      return node.items.map((item) => {
        if (f.kind === "message" && item.kind === "null") this.nullElement ??= f.name;
        return this.single(item, f) ?? this.zero(f);
      });
    }
    return this.single(node, f);
  }

  private zero(f: FieldDesc): Value {
    if (f.kind === "message") return newMsg(f.message!());
    return f.kind === "enum"
      ? 0
      : f.kind === "bool"
        ? false
        : f.kind === "bytes"
          ? new Uint8Array()
          : f.kind === "string"
            ? ""
            : 0n;
  }

  private single(node: JsonNode, f: FieldDesc): Value | undefined {
    if (node.kind === "null") return undefined;
    switch (f.kind) {
      case "message":
        return this.message(node, f.message!());
      case "enum":
        return this.enumValue(node, f);
      case "int64":
      case "uint64":
        return this.integer(node, f.kind);
      case "bool":
        if (node.kind === "true" || node.kind === "false") return node.kind === "true";
        throw typeError(jsonKind(node), "bool");
      case "string":
        if (node.kind === "string") return utf8.decode(stringBytes(this.text, node));
        throw typeError(jsonKind(node), "string");
      case "bytes":
        return this.bytesValue(node);
    }
  }

  private enumValue(node: JsonNode, f: FieldDesc): number {
    const type = f.enumType!;
    if (node.kind === "string") {
      const raw = innerBytes(this.text, node);
      const i = type.values.indexOf(asciiText(raw));
      if (i < 0) throw new DecodeError(`unknown value ${goQuote(raw)} for enum ${type.goType}`);
      return i;
    }
    if (node.kind === "number") {
      const n = goInt(asciiText(this.text.subarray(node.start, node.end)));
      if (n === undefined || n < INT32_MIN || n > INT32_MAX) throw typeError(`number ${this.raw(node)}`, type.goType);
      return Number(n);
    }
    throw typeError(jsonKind(node), type.goType);
  }

  /** jsonpb strips the quotes of a quoted number, then json.Unmarshal parses what is left as a document. */
  private integer(node: JsonNode, kind: "int64" | "uint64"): bigint | undefined {
    let text = this.text;
    let value = node;
    if (node.kind === "string") {
      text = innerBytes(this.text, node);
      try {
        value = parseDocument(text);
      } catch (err) {
        if (err instanceof JsonSyntaxError) throw new DecodeError(err.message);
        throw err;
      }
    }
    if (value.kind === "null") return undefined;
    if (value.kind !== "number") throw typeError(jsonKind(value), kind);
    const literal = asciiText(text.subarray(value.start, value.end));
    const n = goInt(literal);
    const [min, max] = kind === "int64" ? [INT64_MIN, INT64_MAX] : [0n, UINT64_MAX];
    if (n === undefined || n < min || n > max) throw typeError(`number ${literal}`, kind);
    return n;
  }

  /** encoding/json's []byte: a base64 string, or an array of numbers 0..255 (first error wins). */
  private bytesValue(node: JsonNode): Uint8Array {
    if (node.kind === "string") {
      try {
        return decodeGoBase64(stringBytes(this.text, node));
      } catch (err) {
        if (err instanceof Base64Error) throw new DecodeError(err.message);
        throw err;
      }
    }
    if (node.kind !== "array") throw typeError(jsonKind(node), "[]uint8");
    let first: DecodeError | undefined;
    const out = node.items.map((item) => {
      if (item.kind === "null") return 0;
      const n = item.kind === "number" ? goInt(this.raw(item)) : undefined;
      if (n !== undefined && n >= 0n && n <= 255n) return Number(n);
      first ??= typeError(item.kind === "number" ? `number ${this.raw(item)}` : jsonKind(item), "uint8");
      return 0;
    });
    if (first) throw first;
    return Uint8Array.from(out);
  }

  private raw(node: JsonNode): string {
    return asciiText(this.text.subarray(node.start, node.end));
  }
}

/**
 * The order jsonpb visits a message's oneof members in: it walks a Go map of them (OneofTypes, filled in
 * declaration order), and Go walks a map of at most 8 entries from a random one of its 8 slots, wrapping. So when
 * a request sets two members of one oneof, which one it keeps differs from request to request: for a RequestOp
 * with both request_range and request_put, the put 7 times in 8.
 */
function oneofWalk(members: readonly FieldDesc[]): FieldDesc[] {
  // More than 8 would spread over buckets by hash; no etcd message has more than 5.
  if (members.length < 2 || members.length > SLOTS) return [...members];
  const start = Math.floor(Math.random() * SLOTS);
  const order: FieldDesc[] = [];
  for (let i = 0; i < SLOTS; i++) {
    const member = members[(start + i) % SLOTS];
    if (member) order.push(member);
  }
  return order;
}

/** Entries in one bucket of a Go map. */
const SLOTS = 8;

/** strconv.ParseInt(s, 10, 64)'s accepted syntax for a JSON literal: an optional '-' and digits only. */
function goInt(literal: string): bigint | undefined {
  return /^-?\d+$/.test(literal) ? BigInt(literal) : undefined;
}
