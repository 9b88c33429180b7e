/**
 * Splits a streamed body into lines. The gateway writes one JSON object per line, but the network cuts
 * chunks anywhere: one chunk may hold several lines and a line may span chunks (or a UTF-8 character).
 */
export async function* lines(body: ReadableStream<Uint8Array>): AsyncGenerator<string, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let newline = buffer.indexOf("\n");
      while (newline >= 0) {
        const line = buffer.slice(0, newline).trim();
        buffer = buffer.slice(newline + 1);
        if (line.length > 0) yield line;
        newline = buffer.indexOf("\n");
      }
    }
    const rest = (buffer + decoder.decode()).trim();
    if (rest.length > 0) yield rest;
  } finally {
    // Cancelling (not just releasing) tells the runtime to drop the connection when the consumer stops early.
    reader.cancel().catch(() => {});
  }
}
