// Outcomes the caller can act on (indeterminate writes, writes provably not applied), and a waiter that
// watches its predecessor without missing a release that lands before its watch exists.
import { describe, expect, it } from "vitest";
import { Etcd, type Fetch } from "../../src/index.js";
import { rejection, sleep } from "../support/async.js";
import { A, B, connectionReset, hang, json, jsonText, route, useGateway } from "../support/gateway.js";
import { mockClient } from "../support/mock.js";
import { header, unaryErrorBody } from "../support/wire.js";

const server = useGateway();

describe("indeterminate outcomes are marked", () => {
  it("a put whose connection broke after it was sent is indeterminate", async () => {
    const fetch: Fetch = () => Promise.reject(connectionReset());
    const error = await rejection(new Etcd({ endpoints: A, fetch }).put("k", "v"));
    expect(error.code).toBe("UNAVAILABLE");
    expect(error.indeterminate).toBe(true);
  });

  it("a put etcd refused is not indeterminate", async () => {
    route(server, "/v3/kv/put", () => jsonText(unaryErrorBody("3.4", 3, "etcdserver: request is too large"), 400));
    const error = await rejection(new Etcd({ endpoints: A }).put("k", "v"));
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.indeterminate).toBe(false);
  });

  it("a put that timed out after it was sent is indeterminate; a read that timed out is not", async () => {
    route(server, "/v3/kv/put", async ({ request }) => {
      await hang(request);
      return json({ header: header(6) });
    });
    route(server, "/v3/kv/range", async ({ request }) => {
      await hang(request);
      return json({ header: header(6) });
    });
    const etcd = new Etcd({ endpoints: A, timeout: 200 });
    const write = await rejection(etcd.put("k", "v"));
    expect(write.code).toBe("TIMEOUT");
    expect(write.indeterminate).toBe(true);
    const read = await rejection(etcd.get("k"));
    expect(read.code).toBe("TIMEOUT");
    expect(read.indeterminate).toBe(false);
  });

  it("etcd's own 'request timed out' leaves a write indeterminate (the proposal may still commit)", async () => {
    route(server, "/v3/kv/put", () => jsonText(unaryErrorBody("3.5", 14, "etcdserver: request timed out"), 503));
    const error = await rejection(new Etcd({ endpoints: A }).put("k", "v"));
    expect(error.indeterminate).toBe(true);
  });

  it("a write stays indeterminate when a later attempt is refused outright", async () => {
    // The first attempt's connection broke after sending; the resend (a guarded delete may be resent) is
    // refused. The first may still have been applied, so the caller must know.
    let calls = 0;
    const fetch: Fetch = async (input, init) => {
      if (calls++ === 0) throw connectionReset();
      return globalThis.fetch(input, init) as ReturnType<Fetch>;
    };
    route(
      server,
      "/v3/kv/txn",
      () => jsonText(unaryErrorBody("3.4", 3, "etcdserver: duplicate key given in txn request"), 400),
      A,
    );
    const etcd = new Etcd({ endpoints: A, fetch });
    const { cmp, op } = await import("../../src/index.js");
    const error = await rejection(
      etcd
        .txn()
        .if(cmp.version("k", ">", 0))
        .then(op.delete("k"))
        .commit({ idempotent: true }),
    );
    expect(calls).toBe(2);
    expect(error.indeterminate).toBe(true);
  });
});

describe("a write provably not applied fails over", () => {
  // etcd's gateway could not reach its own member's gRPC server: the request went no further than the gateway.
  it("a put answered 'Error while dialing ... connection refused' by one gateway is sent to the next", async () => {
    const refused = route(
      server,
      "/v3/kv/put",
      () =>
        jsonText(
          unaryErrorBody(
            "3.4",
            14,
            'connection error: desc = "transport: ' +
              'Error while dialing dial tcp 127.0.0.1:2379: connect: connection refused"',
          ),
          503,
        ),
      A,
    );
    const served = route(server, "/v3/kv/put", () => json({ header: header(7) }), B);
    const result = await new Etcd({ endpoints: [A, B] }).put("k", "v");
    expect(result.header.revision).toBe(7);
    expect(refused).toHaveLength(1);
    expect(served).toHaveLength(1);
  });
});

describe("a waiter's watch", () => {
  it(
    "has no start revision (etcd delivers it at once) " + "and still sees a release that lands before it exists",
    async () => {
      const watches: unknown[] = [];
      let releaseFirst: (() => Promise<void>) | undefined;
      // Hold back the waiter's watch until the holder has released: the release lands in the gap between the
      // waiter's read of the line and the watch's creation.
      const { etcd } = mockClient(
        {},
        {
          through: async (input, init, forward) => {
            if (input.endsWith("/v3/watch")) {
              watches.push(JSON.parse(init.body));
              const release = releaseFirst;
              releaseFirst = undefined;
              await release?.();
            }
            return forward(input, init);
          },
        },
      );
      const holderSession = await etcd.session({ ttl: 30 });
      const holder = await holderSession.mutex("gap").lock();
      releaseFirst = () => holder.unlock();
      const waiterSession = await etcd.session({ ttl: 30 });
      const started = performance.now();
      const lock = await waiterSession.mutex("gap").lock({ timeout: 10_000 });
      // Well before the watch's idle timeout (2 s): the gap read found the predecessor gone.
      expect(performance.now() - started).toBeLessThan(1_500);
      expect(lock.revision).toBeGreaterThan(holder.revision);
      expect(watches).toHaveLength(1);
      expect(
        (watches[0] as { create_request: { start_revision?: unknown } }).create_request.start_revision,
      ).toBeUndefined();
      await Promise.all([waiterSession.close(), holderSession.close()]);
    },
  );
});

describe("requests in flight", () => {
  it(
    "at most maxConcurrentRequests are on the wire; " +
      "the rest wait in the client without using their attempts' time",
    async () => {
      let active = 0;
      let peak = 0;
      // Each request takes 100 ms on the wire: with a limit of 4, 20 reads take 5 rounds (~500 ms), longer than
      // one attempt's 200 ms, so a queued read that counted its wait against its attempt would time out.
      const { etcd } = mockClient(
        { maxConcurrentRequests: 4, attemptTimeout: 200, timeout: 5_000 },
        {
          through: async (input, init, forward) => {
            active++;
            peak = Math.max(peak, active);
            await sleep(100);
            active--;
            return forward(input, init);
          },
        },
      );
      const reads = await Promise.all(Array.from({ length: 20 }, (_, i) => etcd.get(`k${i}`)));
      expect(reads).toHaveLength(20);
      expect(peak).toBe(4);
    },
  );

  it("a call waiting for a place ends at its own timeout or abort, and leaves the queue", async () => {
    const hanging: Fetch = () => new Promise(() => {});
    const etcd = new Etcd({
      endpoints: "http://etcd.test:2379",
      fetch: hanging,
      maxConcurrentRequests: 1,
      timeout: 5_000,
    });
    const first = rejection(etcd.get("a", { timeout: 600 }));
    const queued = rejection(etcd.get("b", { timeout: 200 }));
    const controller = new AbortController();
    const aborted = rejection(etcd.get("c", { signal: controller.signal }));
    controller.abort();
    expect((await aborted).code).toBe("ABORTED");
    expect((await queued).code).toBe("TIMEOUT");
    expect((await first).code).toBe("TIMEOUT");
  });

  it("maxConcurrentRequests must be a whole number >= 1", () => {
    for (const bad of [0, -1, 1.5, "4"]) {
      expect(() => new Etcd({ endpoints: A, maxConcurrentRequests: bad as never })).toThrow(
        expect.objectContaining({ code: "INVALID_ARGUMENT" }),
      );
    }
  });
});
