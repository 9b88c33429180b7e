import { answerTooLarge, redirected } from "../errors/catalogue.js";
import { ByteBuffer } from "./byte-buffer.js";
import { type FetchResponse, READ_BOUNDED, type ReadBounded } from "./fetch.js";

/**
 * Reading an answer's body without trusting its size: whatever answers may send an endless body, a gzip
 * bomb (the stream yields decoded bytes, so those are what is counted) or a keepalive stream of which only
 * the first line matters. Past the limit the body is cancelled, which closes the connection.
 */

/** An error body is only parsed for etcd's small JSON error or shown as a preview: no need for more. */
const ERROR_BODY_LIMIT = 64 * 1024;

export interface BodyLimits {
  /** The most decoded bytes to buffer for a successful answer. */
  maxBytes: number;
  /** Stop at the first newline: the answer is a stream of lines of which only the first is used. */
  firstLine?: boolean | undefined;
}

/**
 * The body as text: a 200's whole body (or first line) up to `maxBytes`, else RESOURCE_EXHAUSTED; another
 * status's body up to a small preview (cut silently: it only feeds the error); a redirect is never read.
 */
export async function readBody(response: FetchResponse, limits: BodyLimits, endpoint: string): Promise<string> {
  const status = response.status;
  if (status === 0 || (status >= 300 && status < 400)) {
    response.body?.cancel().catch(() => {});
    throw redirected(status, endpoint);
  }
  const ok = status === 200;
  const maxBytes = ok ? limits.maxBytes : Math.min(limits.maxBytes, ERROR_BODY_LIMIT);
  const firstLine = ok && limits.firstLine === true;
  const bounded = (response as { [READ_BOUNDED]?: ReadBounded })[READ_BOUNDED];
  if (ok && bounded !== undefined) {
    const bytes = await bounded(maxBytes, firstLine);
    if (bytes === undefined)
      throw answerTooLarge(maxBytes, firstLine ? "the first line of the answer" : "the answer", endpoint);
    return decoder.decode(bytes);
  }
  const body = response.body;
  if (body === null) {
    // A fetch without a body stream (a stub, say) has already buffered the text: only its size is checked.
    const text = await response.text();
    if (text.length <= maxBytes) return firstLine ? untilNewline(text) : text;
    if (!ok) return text.slice(0, maxBytes);
    throw answerTooLarge(maxBytes, "the answer", endpoint);
  }
  return readStream(body, maxBytes, ok, firstLine, endpoint);
}

async function readStream(
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
  ok: boolean,
  firstLine: boolean,
  endpoint: string,
): Promise<string> {
  const reader = body.getReader();
  const received = new ByteBuffer(maxBytes);
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        finished = true;
        return decoder.decode(received.take());
      }
      const outcome = received.appendBounded(value, firstLine);
      if (outcome === "over") {
        if (ok) throw answerTooLarge(maxBytes, firstLine ? "the first line of the answer" : "the answer", endpoint);
        // An error body (never cut at a line) is kept up to the limit, for its preview.
        received.append(value.subarray(0, maxBytes - received.length));
        return decoder.decode(received.take());
      }
      if (outcome === "line") return decoder.decode(received.take());
    }
  } finally {
    // Anything left unread (the rest of a stream, an oversized body) is dropped with its connection.
    if (!finished) reader.cancel().catch(() => {});
  }
}

const decoder = new TextDecoder();

function untilNewline(text: string): string {
  const newline = text.indexOf("\n");
  return newline < 0 ? text : text.slice(0, newline);
}
