import { answerTooLarge } from "../errors/catalogue.js";
import { DEFAULT_MAX_RESPONSE_BYTES } from "./config.js";

const NEWLINE = 0x0a;

/**
 * Splits a streamed body into lines. The gateway writes one JSON object per line, but the network cuts
 * chunks anywhere: one chunk may hold several lines and a line may span chunks (or a UTF-8 character).
 * A line longer than `maxLineBytes` (a server that never sends a newline) ends the stream with
 * RESOURCE_EXHAUSTED instead of being buffered until memory runs out.
 */
export async function* lines(
  body: ReadableStream<Uint8Array>,
  maxLineBytes = DEFAULT_MAX_RESPONSE_BYTES,
): AsyncGenerator<string, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  /** Bytes received since the last newline: the size of the line being buffered. */
  let pending = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      pending = checkLines(value, pending, maxLineBytes);
      // Only the new text can hold a newline not yet seen: never rescan the buffered part of a long line.
      const from = buffer.length;
      buffer += decoder.decode(value, { stream: true });
      let newline = buffer.indexOf("\n", from);
      let start = 0;
      while (newline >= 0) {
        const line = buffer.slice(start, newline).trim();
        start = newline + 1;
        if (line.length > 0) yield line;
        newline = buffer.indexOf("\n", start);
      }
      if (start > 0) buffer = buffer.slice(start);
    }
    const rest = (buffer + decoder.decode()).trim();
    if (rest.length > 0) yield rest;
  } finally {
    // Cancelling (not just releasing) tells the runtime to drop the connection when the consumer stops early.
    reader.cancel().catch(() => {});
  }
}

/** The bytes of the unfinished line after `chunk`, given `pending` before it; throws when a line is too long. */
function checkLines(chunk: Uint8Array, pending: number, max: number): number {
  let from = 0;
  for (let newline = chunk.indexOf(NEWLINE); newline >= 0; newline = chunk.indexOf(NEWLINE, from)) {
    if (pending + newline - from > max) throw answerTooLarge(max, "a watch message");
    pending = 0;
    from = newline + 1;
  }
  pending += chunk.byteLength - from;
  if (pending > max) throw answerTooLarge(max, "a watch message");
  return pending;
}
