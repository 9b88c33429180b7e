// Failover between endpoints, which calls are resent (and which must not be), backoff, auth token refresh.
import { afterEach, describe, expect, it, vi } from "vitest";
import { cmp, Etcd, EtcdError, op, type Fetch } from "../../src/index.js";
import { rejection, sleep } from "../support/async.js";
import { A, B, connectionReset, json, jsonText, route, useGateway } from "../support/gateway.js";
import { BIG_LEASE, header, kv, unaryErrorBody } from "../support/wire.js";

const server = useGateway();

const NO_LEADER = () => jsonText(unaryErrorBody("3.5", 14, "etcdserver: no leader"), 503);
const rangeOk = () =>
  json({ header: header(5), kvs: [kv({ key: "k", value: "v", create: 5, mod: 5, version: 1 })], count: "1" });

/** What undici's fetch throws when nothing listens on the port: the request never left. */
function connectionRefused(): TypeError {
  const cause = Object.assign(new Error("connect ECONNREFUSED 10.0.0.1:2379"), {
    code: "ECONNREFUSED",
    errno: -111,
    syscall: "connect",
  });
  return new TypeError("fetch failed", { cause });
}

/** A fetch where endpoint A fails with `error` (counting calls) and anything else goes to msw. */
function failingOnA(error: () => unknown) {
  const calls: string[] = [];
  const fetch: Fetch = (input, init) => {
    calls.push(input);
    if (input.startsWith(A)) return Promise.reject(error());
    return globalThis.fetch(input, init) as ReturnType<Fetch>;
  };
  return { fetch, calls };
}

afterEach(() => vi.restoreAllMocks());

describe("failover", () => {
  it("a get answered 503 code 14 by the first endpoint succeeds on the second", async () => {
    const a = route(server, "/v3/kv/range", NO_LEADER, A);
    const b = route(server, "/v3/kv/range", rangeOk, B);
    const etcd = new Etcd({ endpoints: [A, B] });
    expect((await etcd.get("k"))!.value).toBe("v");
    expect(a).toHaveLength(1);
    expect(b).toHaveLength(1);
    // The client stays on the healthy member.
    await etcd.get("k");
    expect(a).toHaveLength(1);
    expect(b).toHaveLength(2);
  });

  it("a read answered by a proxy's 502 HTML page moves on to the next endpoint", async () => {
    const a = route(server, "/v3/kv/range", () => new Response("<html>502 Bad Gateway</html>", { status: 502 }), A);
    route(server, "/v3/kv/range", rangeOk, B);
    expect((await new Etcd({ endpoints: [A, B] }).get("k"))!.value).toBe("v");
    expect(a).toHaveLength(1);
  });

  it("a put answered 503 is NOT resent (exactly one request): the write may have been applied", async () => {
    const a = route(server, "/v3/kv/put", NO_LEADER, A);
    const b = route(server, "/v3/kv/put", () => json({ header: header(6) }), B);
    const error = await rejection(new Etcd({ endpoints: [A, B] }).put("k", "v"));
    expect(error).toBeInstanceOf(EtcdError);
    expect(error.code).toBe("UNAVAILABLE");
    expect(a.length + b.length).toBe(1);
  });

  it("a put whose connection was refused IS resent to the next endpoint", async () => {
    const b = route(server, "/v3/kv/put", () => json({ header: header(6) }), B);
    const { fetch, calls } = failingOnA(connectionRefused);
    const result = await new Etcd({ endpoints: [A, B], fetch }).put("k", "v");
    expect(result.header.revision).toBe(6);
    expect(calls).toEqual([`${A}/v3/kv/put`, `${B}/v3/kv/put`]);
    expect(b).toHaveLength(1);
  });

  it("a put whose connection was reset mid-flight is NOT resent", async () => {
    route(server, "/v3/kv/put", () => json({ header: header(6) }), B);
    const { fetch, calls } = failingOnA(connectionReset);
    const error = await rejection(new Etcd({ endpoints: [A, B], fetch }).put("k", "v"));
    expect(error).toBeInstanceOf(EtcdError);
    expect(error.code).toBe("UNAVAILABLE");
    expect(error.cause).toBeInstanceOf(TypeError);
    expect(calls).toEqual([`${A}/v3/kv/put`]);
  });

  it("a delete or grant whose connection was reset is NOT resent either", async () => {
    const { fetch, calls } = failingOnA(connectionReset);
    const etcd = new Etcd({ endpoints: [A, B], fetch });
    expect((await rejection(etcd.delete("k"))).code).toBe("UNAVAILABLE");
    expect((await rejection(etcd.lease.grant(10))).code).toBe("UNAVAILABLE");
    expect(calls).toEqual([`${A}/v3/kv/deleterange`, `${A}/v3/lease/grant`]);
  });
});

describe("retries of reads", () => {
  it("a read is retried on network errors at most `retries` times, with a bounded delay between", async () => {
    vi.spyOn(Math, "random").mockReturnValue(0.999); // the longest backoff each time
    const times: number[] = [];
    const fetch: Fetch = () => {
      times.push(performance.now());
      return Promise.reject(connectionReset());
    };
    const error = await rejection(new Etcd({ endpoints: [A, B], fetch, retries: 3 }).get("k"));
    expect(error).toBeInstanceOf(EtcdError);
    expect(error.code).toBe("UNAVAILABLE");
    expect(times).toHaveLength(4); // the first try and 3 retries
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    for (const gap of gaps) {
      expect(gap).toBeGreaterThanOrEqual(15); // there is a delay ...
      expect(gap).toBeLessThan(1_100); // ... and it is capped
    }
    expect(gaps[2]!).toBeGreaterThan(gaps[0]!); // and it grows
  });

  it("retries: 0 sends a read exactly once", async () => {
    const a = route(server, "/v3/kv/range", NO_LEADER, A);
    const b = route(server, "/v3/kv/range", rangeOk, B);
    const error = await rejection(new Etcd({ endpoints: [A, B], retries: 0 }).get("k"));
    expect(error.code).toBe("UNAVAILABLE");
    expect(a.length + b.length).toBe(1);
  });

  it("a read is not retried on a definitive error (InvalidArgument)", async () => {
    const a = route(
      server,
      "/v3/kv/range",
      () => jsonText(unaryErrorBody("3.4", 3, "etcdserver: key is not provided"), 400),
      A,
    );
    const b = route(server, "/v3/kv/range", rangeOk, B);
    expect((await rejection(new Etcd({ endpoints: [A, B] }).get("k"))).code).toBe("INVALID_ARGUMENT");
    expect(a.length + b.length).toBe(1);
  });

  it("a txn with only gets is retried; a txn with a put is not", async () => {
    const a = route(server, "/v3/kv/txn", NO_LEADER, A);
    const b = route(
      server,
      "/v3/kv/txn",
      () => json({ header: header(8), succeeded: true, responses: [{ response_range: { header: header(8) } }] }),
      B,
    );
    const reads = await new Etcd({ endpoints: [A, B] })
      .txn()
      .if(cmp.version("k", ">", 0))
      .then(op.get("k"))
      .commit();
    expect(reads.succeeded).toBe(true);
    expect([a.length, b.length]).toEqual([1, 1]);

    const a2 = route(server, "/v3/kv/txn", NO_LEADER, A);
    const b2 = route(server, "/v3/kv/txn", () => json({ header: header(8), succeeded: true }), B);
    const error = await rejection(
      new Etcd({ endpoints: [A, B] })
        .txn()
        .if(cmp.version("k", "==", 0))
        .then(op.get("k"))
        .else(op.put("k", "v"))
        .commit(),
    );
    expect(error.code).toBe("UNAVAILABLE");
    expect(a2.length + b2.length).toBe(1);
  });

  it("lease keepalive and timetolive are retried on the next endpoint", async () => {
    route(server, "/v3/lease/keepalive", NO_LEADER, A);
    route(server, "/v3/lease/timetolive", NO_LEADER, A);
    const keep = route(
      server,
      "/v3/lease/keepalive",
      () => jsonText(`{"result":{"header":${JSON.stringify(header(3))},"ID":"${BIG_LEASE}","TTL":"30"}}\n`),
      B,
    );
    const ttl = route(
      server,
      "/v3/lease/timetolive",
      () => json({ header: header(3), ID: BIG_LEASE, TTL: "29", grantedTTL: "30" }),
      B,
    );
    expect((await new Etcd({ endpoints: [A, B] }).lease.keepAliveOnce(BIG_LEASE)).ttl).toBe(30);
    expect((await new Etcd({ endpoints: [A, B] }).lease.timeToLive(BIG_LEASE)).ttl).toBe(29);
    expect([keep.length, ttl.length]).toEqual([1, 1]);
  });

  it("lease revoke on 503 is not retried", async () => {
    const a = route(server, "/v3/lease/revoke", NO_LEADER, A);
    const b = route(server, "/v3/lease/revoke", () => json({ header: header(3) }), B);
    expect((await rejection(new Etcd({ endpoints: [A, B] }).lease.revoke(BIG_LEASE))).code).toBe("UNAVAILABLE");
    expect(a.length + b.length).toBe(1);
  });
});

describe("auth", () => {
  const auth = { username: "root", password: "pw" };

  it("authenticates once, then sends the raw token (no Bearer) as Authorization", async () => {
    const auths = route(server, "/v3/auth/authenticate", () => json({ header: header(1), token: "tok1.abc" }));
    const reads = route(server, "/v3/kv/range", rangeOk);
    const etcd = new Etcd({ endpoints: [A], auth });
    await etcd.get("k");
    await etcd.get("k");
    expect(auths).toHaveLength(1);
    expect(auths[0]!.body).toEqual({ name: "root", password: "pw" });
    expect(auths[0]!.headers.authorization).toBeUndefined();
    expect(reads.map((r) => r.headers.authorization)).toEqual(["tok1.abc", "tok1.abc"]);
  });

  it('401 code 16 "invalid auth token" → exactly one re-authentication, then success', async () => {
    let n = 0;
    const auths = route(server, "/v3/auth/authenticate", () => json({ header: header(1), token: `tok${++n}` }));
    const reads = route(server, "/v3/kv/range", (req) =>
      req.headers.authorization === "tok1"
        ? jsonText(unaryErrorBody("3.4", 16, "etcdserver: invalid auth token"), 401)
        : rangeOk(),
    );
    const etcd = new Etcd({ endpoints: [A], auth, retries: 0 });
    expect((await etcd.get("k"))!.value).toBe("v");
    expect(auths).toHaveLength(2);
    expect(reads.map((r) => r.headers.authorization)).toEqual(["tok1", "tok2"]);
  });

  it("a put refused with 401 is resent once with a new token (the refused request was not applied)", async () => {
    let n = 0;
    route(server, "/v3/auth/authenticate", () => json({ header: header(1), token: `tok${++n}` }));
    const puts = route(server, "/v3/kv/put", (req) =>
      req.headers.authorization === "tok1"
        ? jsonText(unaryErrorBody("3.6", 16, "etcdserver: invalid auth token"), 401)
        : json({ header: header(9) }),
    );
    expect((await new Etcd({ endpoints: [A], auth }).put("k", "v")).header.revision).toBe(9);
    expect(puts).toHaveLength(2);
  });

  it("a token refused twice gives UNAUTHENTICATED, without looping", async () => {
    let n = 0;
    const auths = route(server, "/v3/auth/authenticate", () => json({ header: header(1), token: `tok${++n}` }));
    const reads = route(server, "/v3/kv/range", () =>
      jsonText(unaryErrorBody("3.5", 16, "etcdserver: invalid auth token"), 401),
    );
    const error = await rejection(new Etcd({ endpoints: [A], auth }).get("k"));
    expect(error).toBeInstanceOf(EtcdError);
    expect(error.code).toBe("UNAUTHENTICATED");
    expect(auths).toHaveLength(2);
    expect(reads).toHaveLength(2);
  });

  it("concurrent calls share one authenticate request", async () => {
    const auths = route(server, "/v3/auth/authenticate", async () => {
      await sleep(30);
      return json({ header: header(1), token: "shared" });
    });
    const reads = route(server, "/v3/kv/range", rangeOk);
    const etcd = new Etcd({ endpoints: [A], auth });
    await Promise.all([etcd.get("a"), etcd.get("b"), etcd.range({ prefix: "c" }), etcd.get("d"), etcd.get("e")]);
    expect(auths).toHaveLength(1);
    expect(reads).toHaveLength(5);
    expect(new Set(reads.map((r) => r.headers.authorization))).toEqual(new Set(["shared"]));
  });

  it("concurrent calls refused with the same expired token re-authenticate once between them", async () => {
    let n = 0;
    const auths = route(server, "/v3/auth/authenticate", async () => {
      await sleep(10);
      return json({ header: header(1), token: `tok${++n}` });
    });
    route(server, "/v3/kv/range", (req) =>
      req.headers.authorization === "tok1"
        ? jsonText(unaryErrorBody("3.5", 16, "etcdserver: invalid auth token"), 401)
        : rangeOk(),
    );
    const etcd = new Etcd({ endpoints: [A], auth });
    await Promise.all([etcd.get("a"), etcd.get("b"), etcd.get("c")]);
    expect(auths).toHaveLength(2);
  });

  it("wrong credentials fail the call with UNAUTHENTICATED, and the next call tries again", async () => {
    const auths = route(server, "/v3/auth/authenticate", () =>
      jsonText(unaryErrorBody("3.5", 3, "etcdserver: authentication failed, invalid user ID or password"), 400),
    );
    const reads = route(server, "/v3/kv/range", rangeOk);
    const etcd = new Etcd({ endpoints: [A], auth });
    expect((await rejection(etcd.get("k"))).code).toBe("UNAUTHENTICATED");
    expect((await rejection(etcd.get("k"))).code).toBe("UNAUTHENTICATED");
    expect(auths).toHaveLength(2);
    expect(reads).toHaveLength(0);
  });
});
