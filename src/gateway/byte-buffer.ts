const NEWLINE = 0x0a;

/**
 * Bytes gathered from a stream's chunks. A chunk may be a small view of a much larger buffer (a socket read
 * of a few bytes into a 64 KiB allocation, say): keeping the views would pin their whole buffers, so that a
 * capped read could hold many times its cap. So chunks are copied into one growing array, except the first
 * while it is alone, which is most answers, whole in one chunk, and used at once.
 */
export class ByteBuffer {
  readonly #limit: number;
  #single: Uint8Array | undefined;
  #bytes = new Uint8Array(0);
  #length = 0;

  /** `limit`: the most the caller will append; growth never allocates past it. */
  constructor(limit: number) {
    this.#limit = limit;
  }

  get length(): number {
    return this.#single?.byteLength ?? this.#length;
  }

  append(chunk: Uint8Array): void {
    if (chunk.byteLength === 0) return;
    if (this.#length === 0 && this.#single === undefined) {
      this.#single = chunk;
      return;
    }
    if (this.#single !== undefined) {
      const first = this.#single;
      this.#single = undefined;
      this.#copy(first);
    }
    this.#copy(chunk);
  }

  /**
   * One chunk of a bounded read (see body.ts), the same for every way a body arrives: its bytes, or those
   * before its first newline when only the first line is wanted, are added unless they would pass the
   * limit. "line": the first line is complete; "over": nothing was added, the answer is too large.
   */
  appendBounded(chunk: Uint8Array, firstLine: boolean): "more" | "line" | "over" {
    const newline = firstLine ? chunk.indexOf(NEWLINE) : -1;
    const used = newline >= 0 ? chunk.subarray(0, newline) : chunk;
    if (this.length + used.byteLength > this.#limit) return "over";
    this.append(used);
    return newline >= 0 ? "line" : "more";
  }

  /** The bytes so far (the buffer is emptied). */
  take(): Uint8Array {
    const bytes = this.#single ?? this.#bytes.subarray(0, this.#length);
    this.#single = undefined;
    this.#bytes = new Uint8Array(0);
    this.#length = 0;
    return bytes;
  }

  #copy(chunk: Uint8Array): void {
    const needed = this.#length + chunk.byteLength;
    if (needed > this.#bytes.byteLength) {
      const grown = new Uint8Array(Math.max(needed, Math.min(this.#limit, Math.max(2 * this.#bytes.byteLength, 4096))));
      grown.set(this.#bytes.subarray(0, this.#length));
      this.#bytes = grown;
    }
    this.#bytes.set(chunk, this.#length);
    this.#length = needed;
  }
}
