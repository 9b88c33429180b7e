// etcd's gateway answers 503 (gRPC 14) when its own TLS connection to its member fails: the member refused the
// gateway's certificate (its server certificate, without the clientAuth usage). Each text etcd has been seen to
// give for it is named as that cause; the same answer over plain HTTP, or another 503, is left as etcd said it.
import { describe, expect, it } from "vitest";
import { Etcd, type EtcdError, type Fetch } from "../../src/index.js";

const answering =
  (message: string): Fetch =>
  async () =>
    new Response(JSON.stringify({ code: 14, message, details: [] }), {
      status: 503,
      headers: { "content-type": "application/json" },
    });

async function failure(endpoint: string, message: string): Promise<EtcdError> {
  const etcd = new Etcd({ endpoints: endpoint, fetch: answering(message), retries: 0, timeout: 2_000 });
  return etcd.get("k").then(
    () => {
      throw new Error("expected a failure");
    },
    (error: EtcdError) => error,
  );
}

const NAMED = /^etcd's gateway could not connect to its own member \(.+\): .*needs the clientAuth extended key usage/;

describe("the gateway's failed dial of its own member", () => {
  it.each([
    "connection closed",
    'connection error: desc = "transport: authentication handshake failed: remote error: tls: bad certificate"',
    "write tcp 127.0.0.1:46680->127.0.0.1:34545: write: broken pipe",
    "write tcp 127.0.0.1:38412->127.0.0.1:43981: write: connection reset by peer",
    "use of closed network connection",
    "error reading server preface: EOF",
  ])("over https, %s names the missing clientAuth usage", async (message) => {
    const error = await failure("https://etcd.test:2379", message);
    expect(error.code).toBe("UNAVAILABLE");
    expect(error.message).toMatch(NAMED);
    expect(error.message).toContain(message);
  });

  it("over plain http, or with another text, it is etcd's answer as it is", async () => {
    const plain = await failure("http://etcd.test:2379", "write tcp 10.0.0.1:1->10.0.0.2:2: write: broken pipe");
    expect(plain.message).not.toMatch(NAMED);
    const other = await failure("https://etcd.test:2379", "etcdserver: no leader");
    expect(other.message).not.toMatch(NAMED);
  });
});
