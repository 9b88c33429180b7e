const NEWLINE = 0x0a;

/**
 * Chunks that together show at least this share of the buffer they were cut from are kept as they came: what
 * they pin beyond their own bytes is at most a fifteenth of them. Smaller views (a few bytes of a socket
 * read, say) are copied into a pack block, since keeping them would pin their whole buffer.
 */
const KEEP_SHARE = 15 / 16;
/** The size of a pack block: small views are copied into one until it is full. */
const PACK_BYTES = 64 * 1024;

/**
 * Bytes gathered from a stream's chunks, joined once when taken. Chunks are kept as they come rather than
 * copied into one growing array: growing by doubling holds half as much again at its last step and leaves
 * the earlier arrays to the garbage collector, which frees them only once the read is long over (a read
 * refused at its limit cost twice the limit). So the memory held stays within the bytes held, a fifteenth
 * more for the views kept, one pack block and the buffer of the newest views. The first chunk is kept as it
 * came while it is alone: most answers (and most watch messages) come whole in one chunk and are used at once.
 */
export class ByteBuffer {
  readonly #limit: number;
  #length = 0;
  /** The first chunk, while it is alone. */
  #first: Uint8Array | undefined;
  /** The chunks after it (or with it), and the filled stretches of pack blocks, in order. */
  #chunks: Uint8Array[] = [];
  /** The newest chunks, all views of one buffer, not yet decided on (see `#keep`). */
  #views: Uint8Array[] = [];
  #viewBytes = 0;
  /** The pack block being filled: its bytes from `#start` to `#used` are the newest, not yet in `#chunks`. */
  #block: Uint8Array | undefined;
  #start = 0;
  #used = 0;

  /** `limit`: the most the caller will append (see {@link appendBounded}). */
  constructor(limit: number) {
    this.#limit = limit;
  }

  get length(): number {
    return this.#length;
  }

  append(chunk: Uint8Array): void {
    if (chunk.byteLength === 0) return;
    if (this.#length === 0) {
      this.#first = chunk;
    } else {
      if (this.#first !== undefined) this.#keep(this.#first);
      this.#first = undefined;
      this.#keep(chunk);
    }
    this.#length += chunk.byteLength;
  }

  /**
   * One chunk of a bounded read (see body.ts), the same for every way a body arrives: its bytes, or those
   * before its first newline when only the first line is wanted, are added unless they would pass the
   * limit. "line": the first line is complete; "over": nothing was added, the answer is too large.
   */
  appendBounded(chunk: Uint8Array, firstLine: boolean): "more" | "line" | "over" {
    const newline = firstLine ? chunk.indexOf(NEWLINE) : -1;
    const used = newline >= 0 ? chunk.subarray(0, newline) : chunk;
    if (this.#length + used.byteLength > this.#limit) return "over";
    this.append(used);
    return newline >= 0 ? "line" : "more";
  }

  /** The bytes so far, in one array (the buffer is emptied). */
  take(): Uint8Array {
    let bytes = this.#first;
    if (bytes === undefined) {
      this.#settle();
      this.#seal();
      const chunks = this.#chunks;
      if (chunks.length === 1) {
        bytes = chunks[0]!;
      } else {
        bytes = new Uint8Array(this.#length);
        let offset = 0;
        for (const chunk of chunks) {
          bytes.set(chunk, offset);
          offset += chunk.byteLength;
        }
      }
    }
    this.#first = undefined;
    this.#chunks = [];
    // The bytes taken may be a view of the block: a new one is started for what comes next.
    this.#block = undefined;
    this.#length = 0;
    return bytes;
  }

  /**
   * Keeps `chunk`. Views of one buffer come in a row (the parts of one socket read around a chunk boundary
   * of the HTTP framing): they are decided together once a chunk of another buffer comes, kept as they came
   * if together they show most of it, else copied into the pack block.
   */
  #keep(chunk: Uint8Array): void {
    if (this.#views.length > 0 && chunk.buffer !== this.#views[0]!.buffer) this.#settle();
    this.#views.push(chunk);
    this.#viewBytes += chunk.byteLength;
  }

  #settle(): void {
    const views = this.#views;
    if (views.length === 0) return;
    if (this.#viewBytes >= views[0]!.buffer.byteLength * KEEP_SHARE) {
      this.#seal();
      for (const view of views) this.#chunks.push(view);
    } else {
      for (const view of views) this.#pack(view);
    }
    this.#views = [];
    this.#viewBytes = 0;
  }

  #pack(chunk: Uint8Array): void {
    for (let from = 0; from < chunk.byteLength; ) {
      if (this.#block === undefined || this.#used === this.#block.byteLength) {
        this.#seal();
        this.#block = new Uint8Array(Math.max(1, Math.min(PACK_BYTES, this.#limit)));
        this.#start = this.#used = 0;
      }
      const count = Math.min(chunk.byteLength - from, this.#block.byteLength - this.#used);
      this.#block.set(chunk.subarray(from, from + count), this.#used);
      this.#used += count;
      from += count;
    }
  }

  /** Puts the pack block's newest bytes in line, so that a chunk kept next comes after them. */
  #seal(): void {
    if (this.#block === undefined || this.#used === this.#start) return;
    this.#chunks.push(this.#block.subarray(this.#start, this.#used));
    this.#start = this.#used;
  }
}
