// Just enough HTTP/1.1 to find where each message starts and ends on a keep-alive connection, so a relay
// can act on one request or one answer without understanding anything else. Node-only (Buffer).

/** A slice of the byte stream, in order; every byte fed comes out in exactly one piece. */
export type Piece =
  /** A complete start line and header block. `index` counts requests (for answers: the request answered). */
  | { kind: "head"; index: number; startLine: string; bytes: Buffer }
  | { kind: "body"; index: number; bytes: Buffer }
  /** The message `index` is complete (no bytes). */
  | { kind: "end"; index: number }
  /** Bytes that are not HTTP/1.1 as we know it (an upgraded connection, a head too large): pass or drop whole. */
  | { kind: "opaque"; bytes: Buffer };

type State = "head" | "length" | "chunk-size" | "chunk-data" | "chunk-crlf" | "trailers" | "until-close" | "opaque";

// Larger heads than this are not what a gateway client sends; treat the connection as opaque.
const MAX_HEAD_BYTES = 64 * 1024;
const MAX_LINE_BYTES = 4 * 1024;
const HEAD_END = Buffer.from("\r\n\r\n");

export class HttpFramer {
  readonly #side: "request" | "response";
  /** The method of request `index`, for answers: a HEAD request's answer has no body. */
  readonly #methodOf: (index: number) => string | undefined;
  #state: State = "head";
  /** Unemitted head bytes (a head is emitted whole, so a relay can decide before forwarding anything). */
  #head: Buffer = Buffer.alloc(0);
  /** The current chunk-size or trailer line, kept only to parse it (its bytes are emitted as they come). */
  #line = "";
  #remaining = 0;
  #index = 0;

  constructor(side: "request" | "response", methodOf: (index: number) => string | undefined = () => undefined) {
    this.#side = side;
    this.#methodOf = methodOf;
  }

  /** The index the next (or current) message will carry. */
  get index(): number {
    return this.#index;
  }

  feed(chunk: Buffer): Piece[] {
    const out: Piece[] = [];
    let data = chunk;
    while (data.length > 0) data = this.#step(data, out);
    return out;
  }

  /** The peer closed: a body delimited by the connection's end is complete now. */
  close(): Piece[] {
    if (this.#state !== "until-close") return [];
    this.#state = "opaque";
    return [{ kind: "end", index: this.#index }];
  }

  #step(data: Buffer, out: Piece[]): Buffer {
    const index = this.#index;
    switch (this.#state) {
      case "opaque":
        out.push({ kind: "opaque", bytes: data });
        return Buffer.alloc(0);
      case "until-close":
        out.push({ kind: "body", index, bytes: data });
        return Buffer.alloc(0);
      case "head":
        return this.#stepHead(data, out);
      case "length":
      case "chunk-data": {
        const n = Math.min(this.#remaining, data.length);
        out.push({ kind: "body", index, bytes: data.subarray(0, n) });
        this.#remaining -= n;
        if (this.#remaining === 0) {
          if (this.#state === "length") this.#finish(out);
          else {
            this.#state = "chunk-crlf";
            this.#remaining = 2;
          }
        }
        return data.subarray(n);
      }
      case "chunk-crlf": {
        const n = Math.min(this.#remaining, data.length);
        out.push({ kind: "body", index, bytes: data.subarray(0, n) });
        this.#remaining -= n;
        if (this.#remaining === 0) this.#state = "chunk-size";
        return data.subarray(n);
      }
      case "chunk-size":
      case "trailers":
        return this.#stepLine(data, out);
    }
  }

  #stepHead(data: Buffer, out: Piece[]): Buffer {
    const searchFrom = Math.max(0, this.#head.length - 3);
    this.#head = Buffer.concat([this.#head, data]);
    const end = this.#head.indexOf(HEAD_END, searchFrom);
    if (end < 0) {
      if (this.#head.length > MAX_HEAD_BYTES) this.#toOpaque(out);
      return Buffer.alloc(0);
    }
    const bytes = this.#head.subarray(0, end + HEAD_END.length);
    const rest = this.#head.subarray(end + HEAD_END.length);
    this.#head = Buffer.alloc(0);
    const [startLine = "", ...headerLines] = bytes.toString("latin1", 0, end).split("\r\n");
    out.push({ kind: "head", index: this.#index, startLine, bytes });
    this.#afterHead(startLine, headers(headerLines), out);
    return rest;
  }

  #afterHead(startLine: string, fields: Map<string, string>, out: Piece[]): void {
    if (this.#side === "response") {
      const status = Number(startLine.split(" ")[1]);
      if (status === 101) {
        // Switched protocols: whatever follows is not HTTP/1.1 any more.
        out.push({ kind: "end", index: this.#index });
        this.#state = "opaque";
        return;
      }
      if (status >= 100 && status < 200) return; // Interim: the real answer to the same request follows.
      if (status === 204 || status === 304 || this.#methodOf(this.#index) === "HEAD") return this.#finish(out);
    }
    const coding = fields.get("transfer-encoding");
    if (coding !== undefined && /(^|,)\s*chunked\s*$/i.test(coding)) {
      this.#state = "chunk-size";
      this.#line = "";
      return;
    }
    const length = fields.get("content-length");
    if (length !== undefined && /^\d+$/.test(length.trim())) {
      this.#remaining = Number(length.trim());
      if (this.#remaining === 0) return this.#finish(out);
      this.#state = "length";
      return;
    }
    // A request without a length has no body; an answer without one lasts until the connection closes.
    if (this.#side === "request") return this.#finish(out);
    this.#state = "until-close";
  }

  /** A chunk-size line or a trailer line: bytes go out at once, the line is parsed once it ends. */
  #stepLine(data: Buffer, out: Piece[]): Buffer {
    const newline = data.indexOf(0x0a);
    const take = newline < 0 ? data.length : newline + 1;
    out.push({ kind: "body", index: this.#index, bytes: data.subarray(0, take) });
    this.#line += data.toString("latin1", 0, take);
    if (this.#line.length > MAX_LINE_BYTES) {
      this.#toOpaque(out);
      return data.subarray(take);
    }
    if (newline < 0) return data.subarray(take);
    const line = this.#line.replace(/\r?\n$/, "");
    this.#line = "";
    if (this.#state === "trailers") {
      if (line === "") this.#finish(out);
      return data.subarray(take);
    }
    const size = Number.parseInt(line.split(";")[0]!.trim(), 16);
    if (Number.isNaN(size)) this.#toOpaque(out);
    else if (size === 0) this.#state = "trailers";
    else {
      this.#state = "chunk-data";
      this.#remaining = size;
    }
    return data.subarray(take);
  }

  #finish(out: Piece[]): void {
    out.push({ kind: "end", index: this.#index });
    this.#index++;
    this.#state = "head";
  }

  #toOpaque(out: Piece[]): void {
    if (this.#head.length > 0) out.push({ kind: "opaque", bytes: this.#head });
    this.#head = Buffer.alloc(0);
    this.#state = "opaque";
  }
}

function headers(lines: string[]): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    // Repeated fields join with commas (RFC 9110 5.3); for these two that keeps the last coding last.
    fields.set(name, fields.has(name) ? `${fields.get(name)}, ${value}` : value);
  }
  return fields;
}

/** `POST /v3/kv/txn HTTP/1.1` → method and path (without the query). */
export function parseRequestLine(startLine: string): { method: string; path: string } {
  const [method = "", target = ""] = startLine.split(" ");
  const query = target.indexOf("?");
  return { method, path: query < 0 ? target : target.slice(0, query) };
}
