import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";
import type { MockEtcd } from "../mock.js";

/**
 * One Node HTTP exchange served by the mock: the request becomes a fetch Request whose signal aborts when the
 * client goes away; the answer's status, headers and body are written as they come, chunk by chunk, so watch
 * lines reach the client as the mock produces them. A request etcd would drop closes the socket unanswered; a
 * stream the mock cuts ends the response mid-body.
 */
export async function bridge(mock: MockEtcd, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const abort = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) abort.abort(new DOMException("The client went away", "AbortError"));
  });
  const method = req.method ?? "GET";
  const hasBody = method !== "GET" && method !== "HEAD";
  const request = new Request(`http://${req.headers.host ?? "localhost"}${req.url ?? "/"}`, {
    method,
    headers: headersOf(req),
    ...(hasBody ? { body: Readable.toWeb(req) as ReadableStream<Uint8Array>, duplex: "half" } : {}),
    signal: abort.signal,
  } as RequestInit);
  let response: Response;
  try {
    response = await mock.handle(request, abort.signal);
  } catch {
    // Aborted by the client, or a request etcd answers by closing the connection.
    res.destroy();
    return;
  }
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    // Node chunks a body of unknown length by itself.
    if (name !== "transfer-encoding") headers[name] = value;
  });
  if (!response.body || response.headers.get("transfer-encoding") !== "chunked") {
    // A unary answer in one write, with its length: no chunking, no second packet.
    const body = new Uint8Array(await response.arrayBuffer());
    res.writeHead(response.status, { ...headers, "content-length": String(body.length) });
    res.end(body);
    return;
  }
  res.writeHead(response.status, headers);
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      if (!res.write(value)) await new Promise<void>((resolve) => res.once("drain", resolve).once("close", resolve));
      if (res.destroyed) {
        await reader.cancel();
        return;
      }
    }
    res.end();
  } catch {
    res.destroy();
  }
}

function headersOf(req: IncomingMessage): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  return headers;
}
