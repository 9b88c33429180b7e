// Arguments that reach the wire and fail there (as BAD_RESPONSE, or as a refusal that does not say what was
// wrong) are refused before any request: INVALID_ARGUMENT, with a message that says what to fix.
import { describe, expect, it } from "vitest";
import { Etcd, type EtcdOptions } from "../../src/index.js";
import { rejection } from "../support/async.js";
import { MOCK_ENDPOINT as ENDPOINT, mockClient } from "../support/mock.js";

describe("lease 0, which etcd reads as no lease", () => {
  it.each([
    ["keepAliveOnce", (etcd: Etcd) => etcd.lease.keepAliveOnce("0"), /^lease 0 is no lease/],
    ["revoke", (etcd: Etcd) => etcd.lease.revoke("0"), /^lease 0 is no lease/],
    ["timeToLive", (etcd: Etcd) => etcd.lease.timeToLive("0", { keys: true }), /^lease 0 is no lease/],
    ["timeToLive of 0n", (etcd: Etcd) => etcd.lease.timeToLive(0n as unknown as string), /^lease 0 is no lease/],
    ['revoke of "000"', (etcd: Etcd) => etcd.lease.revoke("000"), /^lease 0 is no lease/],
    // etcd grants a lease of a random ID for ID 0: the call then failed, leaving that lease behind.
    ["grant with id 0", (etcd: Etcd) => etcd.lease.grant(10, { id: "0" }), /^id 0 is no lease/],
    ["a session adopting lease 0", (etcd: Etcd) => etcd.session({ leaseId: "0" }), /^leaseId 0 is no lease/],
  ])(
    "%s is INVALID_ARGUMENT, nothing sent (old: sent, BAD_RESPONSE or a lease left behind)",
    async (_name, call, message) => {
      const { etcd, calls, mock } = mockClient({ retries: 0 });
      const error = await rejection(() => call(etcd));
      expect(error.code).toBe("INVALID_ARGUMENT");
      expect(error.message).toMatch(message);
      expect(calls).toEqual([]);
      expect(mock.leases()).toEqual([]);
    },
  );

  it('put with lease "0" is a put without a lease, as in etcd (a key with a lease is detached from it)', async () => {
    const { etcd, calls } = mockClient({ retries: 0 });
    const { id } = await etcd.lease.grant(30);
    await etcd.put("k", "v", { lease: id });
    await etcd.put("k", "w", { lease: "0" });
    expect(await etcd.get("k")).toMatchObject({ value: "w", lease: "0" });
    expect(calls).toEqual(["/v3/lease/grant", "/v3/kv/put", "/v3/kv/put", "/v3/kv/range"]);
  });
});

describe("headers the protocol owns", () => {
  /** The client the options make: its constructor must throw, and nothing may be sent. */
  function refused(options: Partial<EtcdOptions>): ReturnType<typeof rejection> {
    const { fetch, calls } = mockClient({ retries: 0 });
    const error = rejection(() => new Etcd({ endpoints: [ENDPOINT], fetch, ...options }));
    expect(calls).toEqual([]);
    return error;
  }

  it.each([
    ["content-type", { "Content-Type": "text/plain" }, /^header content-type cannot be given: it is application\/json/],
    ["content-encoding", { "content-encoding": "gzip" }, /^header content-encoding cannot be given/],
    ["grpc-timeout", { "grpc-timeout": "1S" }, /^header grpc-timeout cannot be given: it is set by the SDK/],
    ["grpc-metadata-hasleader", { "Grpc-Metadata-Hasleader": "false" }, /set by the `requireLeader` option/],
  ])("%s is refused at construction, whatever its case (old: accepted and sent)", async (_name, headers, message) => {
    const error = await refused({ headers });
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toMatch(message);
  });

  it.each([
    ["content-length", { "CONTENT-LENGTH": "5" }],
    ["host", { Host: "etcd.example" }],
    ["transfer-encoding", { "transfer-encoding": "chunked" }],
    ["connection", { connection: "close" }],
  ])("%s, which frames the message, is refused at construction too", async (name, headers) => {
    const error = await refused({ headers });
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toBe(
      `header ${name} cannot be given: it frames the message or the connection and is set by fetch`,
    );
  });

  it.each([["authorization"], ["Authorization"], ["grpc-metadata-token"], ["grpc-metadata-authorization"]])(
    "%s is refused with auth, where the SDK sends its token (old: the two tokens fought)",
    async (name) => {
      const error = await refused({ headers: { [name]: "Bearer x" }, auth: { username: "u", password: "p" } });
      expect(error.code).toBe("INVALID_ARGUMENT");
      expect(error.message).toMatch(/cannot be given with `auth`/);
    },
  );

  it("authorization without auth is the caller's own (a proxy's, or a token got elsewhere): sent", async () => {
    const seen: Array<Record<string, string>> = [];
    const { mock } = mockClient({ retries: 0 });
    const etcd = new Etcd({
      endpoints: [ENDPOINT],
      headers: { Authorization: "Bearer proxy" },
      fetch: (input, init) => {
        seen.push(init.headers);
        return mock.fetch(input, init as RequestInit) as ReturnType<NonNullable<EtcdOptions["fetch"]>>;
      },
    });
    await etcd.put("k", "v");
    expect(seen[0]).toMatchObject({ authorization: "Bearer proxy", "content-type": "application/json" });
  });

  it("a bad header value is refused without being shown: it may be a credential", async () => {
    const error = await refused({ headers: { "x-api-key": "k3y-Value\r\nx: y" } });
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toMatch(/^header x-api-key must be a single-line string/);
    expect(error.message).not.toContain("k3y-Value");
  });
});

it("a watch's idleTimeout is checked at watch(), not at the first iteration", () => {
  const { etcd, calls } = mockClient({ retries: 0 });
  expect(() => etcd.watch({ key: "k", idleTimeout: -1 })).toThrow(
    expect.objectContaining({ code: "INVALID_ARGUMENT", message: expect.stringMatching(/^idleTimeout must be/) }),
  );
  expect(calls).toEqual([]);
});

it("a watch's idleTimeout must be finite: etcd refuses Grpc-Timeout: Infinitym, and no stream could end", () => {
  const { etcd, calls } = mockClient({ retries: 0 });
  for (const idleTimeout of [Number.POSITIVE_INFINITY, 2_147_483_648]) {
    expect(() => etcd.watch({ key: "k", idleTimeout })).toThrow(
      expect.objectContaining({
        code: "INVALID_ARGUMENT",
        message: expect.stringMatching(/^idleTimeout must be at most 2147483647 ms: each watch stream needs an end/),
      }),
    );
  }
  expect(calls).toEqual([]);
});

it("a clock without now() and setTimer() is refused when the client is made", async () => {
  for (const clock of [{}, { now: () => 0 }, "mock", null]) {
    const error = await rejection(() => new Etcd({ endpoints: [ENDPOINT], clock: clock as never }));
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toMatch(/^clock must be an object with now\(\) and setTimer\(fire, ms\)/);
  }
});

describe("a recipe's arguments", () => {
  type Session = Awaited<ReturnType<Etcd["session"]>>;
  const many = Array.from({ length: 65 }, (_, i) => `n${i}`);
  it.each([
    ["lockAll of no names", (s: Session) => s.lockAll([]), /^lockAll needs a non-empty array of lock names, got/],
    [
      "lockAll of 65 names",
      (s: Session) => s.lockAll(many),
      /^lockAll takes at most 64 locks in one transaction, got 65$/,
    ],
    ["lockAll of a name twice, apart", (s: Session) => s.lockAll(["a", "b", "a"]), /^lockAll got lock a twice$/],
    ["lockAll of an empty name", (s: Session) => s.lockAll(["a", ""]), /^a lock name must be a non-empty string/],
    [
      "lockAll of a name in another's line",
      (s: Session) => s.lockAll(["a/b", "a"]),
      /^lock a\/b lies inside the line of lock a: they cannot be taken together$/,
    ],
    ["a semaphore without options", (s: Session) => s.semaphore("s", undefined as never), /^permits must be/],
    ["a semaphore of 0 permits", (s: Session) => s.semaphore("s", { permits: 0 }), /^permits must be/],
    ["a semaphore named badly", (s: Session) => s.semaphore("", { permits: 1 }), /^a semaphore name must be/],
    ["a read-write lock named badly", (s: Session) => s.rwlock(""), /^a read-write lock name must be/],
  ])("%s is INVALID_ARGUMENT saying why, nothing sent", async (_, call, message) => {
    const { etcd, calls } = mockClient();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const sent = calls.length;
    const error = await rejection(() => call(session));
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toMatch(message);
    expect(calls.length).toBe(sent);
  });

  it("lockAll of 64 names is sent", async () => {
    const { etcd } = mockClient();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    await (await session.lockAll(many.slice(0, 64))).unlock();
  });
});
