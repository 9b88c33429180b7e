// The HTTP/1.1 framing the fault relay relies on: message boundaries on a keep-alive connection, whatever
// way the bytes are split.
import { describe, expect, it } from "vitest";
import { HttpFramer, type Piece, parseRequestLine } from "../support/http-framing.ts";

/** Feeds `text` in pieces of `step` bytes; returns the pieces and the bytes grouped per message. */
function frame(framer: HttpFramer, text: string, step: number) {
  const bytes = Buffer.from(text, "latin1");
  const pieces: Piece[] = [];
  for (let i = 0; i < bytes.length; i += step) pieces.push(...framer.feed(bytes.subarray(i, i + step)));
  const messages = new Map<number, string>();
  const heads: string[] = [];
  const ends: number[] = [];
  let opaque = "";
  for (const piece of pieces) {
    if (piece.kind === "end") ends.push(piece.index);
    else if (piece.kind === "opaque") opaque += piece.bytes.toString("latin1");
    else {
      if (piece.kind === "head") heads.push(piece.startLine);
      messages.set(piece.index, (messages.get(piece.index) ?? "") + piece.bytes.toString("latin1"));
    }
  }
  return { pieces, messages, heads, ends, opaque };
}

const post = (path: string, body: string) =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\nContent-Type: application/json\r\n\r\n${body}`;
const chunkedPost = (path: string, chunks: string[]) =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n` +
  chunks.map((c) => `${c.length.toString(16)}\r\n${c}\r\n`).join("") +
  "0\r\n\r\n";

describe("HttpFramer", () => {
  for (const step of [1, 3, 7, 10_000]) {
    it(`splits keep-alive requests at their boundaries (fed ${step} bytes at a time)`, () => {
      const first = post("/v3/kv/txn", '{"compare":[]}');
      const second = chunkedPost("/v3/kv/range?x=1", ['{"key":', '"YQ=="}']);
      const third = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
      const { messages, heads, ends } = frame(new HttpFramer("request"), first + second + third, step);
      expect(heads).toEqual(["POST /v3/kv/txn HTTP/1.1", "POST /v3/kv/range?x=1 HTTP/1.1", "GET /health HTTP/1.1"]);
      expect(ends).toEqual([0, 1, 2]);
      expect([...messages.values()]).toEqual([first, second, third]);
    });

    it(`splits answers: content-length, chunked with trailers, then one that lasts until close (${step})`, () => {
      const a = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
      const b = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n";
      const c = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end";
      const framer = new HttpFramer("response");
      const { messages, ends } = frame(framer, a + b + c, step);
      expect(ends).toEqual([0, 1]);
      expect(framer.close()).toEqual([{ kind: "end", index: 2 }]);
      expect([...messages.values()]).toEqual([a, b, c]);
    });
  }

  it("an interim 100 answer belongs to the same request; HEAD, 204 and 304 answers have no body", () => {
    const methods = ["POST", "HEAD", "GET", "GET"];
    const framer = new HttpFramer("response", (i) => methods[i]);
    const text =
      "HTTP/1.1 100 Continue\r\n\r\n" +
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" +
      "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n" + // HEAD: the length describes a body that is not sent
      "HTTP/1.1 204 No Content\r\n\r\n" +
      "HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n";
    const { pieces, ends } = frame(framer, text, 4);
    const heads = pieces.filter((p) => p.kind === "head").map((p) => [p.index, p.startLine]);
    expect(heads).toEqual([
      [0, "HTTP/1.1 100 Continue"],
      [0, "HTTP/1.1 200 OK"],
      [1, "HTTP/1.1 200 OK"],
      [2, "HTTP/1.1 204 No Content"],
      [3, "HTTP/1.1 304 Not Modified"],
    ]);
    expect(ends).toEqual([0, 1, 2, 3]);
  });

  it("a long-lived chunked stream (a watch) yields its bytes as they come, before it ends", () => {
    const framer = new HttpFramer("response");
    const first = frame(framer, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nline1\n\r\n", 5);
    expect(first.ends).toEqual([]);
    expect(first.messages.get(0)).toContain("line1");
    const next = frame(framer, "6\r\nline2\n\r\n", 2);
    expect(next.ends).toEqual([]);
    expect(next.messages.get(0)).toBe("6\r\nline2\n\r\n");
  });

  it("a head larger than 64 KiB turns the connection opaque, losing no byte", () => {
    const huge = `GET / HTTP/1.1\r\nX: ${"a".repeat(70 * 1024)}`;
    const { opaque, heads } = frame(new HttpFramer("request"), `${huge}\r\n\r\nmore`, 4096);
    expect(heads).toEqual([]);
    expect(opaque).toBe(`${huge}\r\n\r\nmore`);
  });

  it("parses a request line into method and path without the query", () => {
    expect(parseRequestLine("POST /v3/kv/txn?a=b HTTP/1.1")).toEqual({ method: "POST", path: "/v3/kv/txn" });
  });
});
