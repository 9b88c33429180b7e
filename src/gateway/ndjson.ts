import { answerTooLarge } from "../errors/catalogue.js";
import { ByteBuffer } from "./byte-buffer.js";
import { DEFAULT_MAX_RESPONSE_BYTES } from "./config.js";

const NEWLINE = 0x0a;
const decoder = new TextDecoder();

/**
 * Splits a streamed body into lines. The gateway writes one JSON object per line, but the network cuts
 * chunks anywhere: one chunk may hold several lines and a line may span chunks (or a UTF-8 character).
 * An unfinished line is kept as bytes and decoded once complete (a newline byte never occurs inside a UTF-8
 * character), so a long line costs its bytes, not a string rebuilt and rescanned per chunk. A line longer
 * than `maxLineBytes` (a server that never sends a newline) ends the stream with RESOURCE_EXHAUSTED instead
 * of being buffered until memory runs out.
 */
export async function* lines(
  body: ReadableStream<Uint8Array>,
  maxLineBytes = DEFAULT_MAX_RESPONSE_BYTES,
): AsyncGenerator<string, void, undefined> {
  const reader = body.getReader();
  /** The unfinished line's bytes. */
  const partial = new ByteBuffer(maxLineBytes);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      let from = 0;
      for (let newline = value.indexOf(NEWLINE); newline >= 0; newline = value.indexOf(NEWLINE, from)) {
        const end = value.subarray(from, newline);
        if (partial.length + end.byteLength > maxLineBytes) throw answerTooLarge(maxLineBytes, "a watch message");
        partial.append(end);
        const line = decoder.decode(partial.take()).trim();
        from = newline + 1;
        if (line.length > 0) yield line;
      }
      if (from < value.byteLength) {
        if (partial.length + value.byteLength - from > maxLineBytes)
          throw answerTooLarge(maxLineBytes, "a watch message");
        partial.append(value.subarray(from));
      }
    }
    const rest = decoder.decode(partial.take()).trim();
    if (rest.length > 0) yield rest;
  } finally {
    // Cancelling (not just releasing) tells the runtime to drop the connection when the consumer stops early.
    reader.cancel().catch(() => {});
  }
}
