// Issue 9, items 4, 5, 7 and 9: bad input is refused with INVALID_ARGUMENT before anything is sent, and
// accepted numbers never turn into request floods. Each test names the old behaviour it catches.
import { inspect } from "node:util";
import { afterEach, describe, expect, it, vi } from "vitest";
import { cmp, Etcd, op } from "../../src/index.js";
import { rejection, sleep, stillPending, within } from "../support/async.js";
import { MOCK_ENDPOINT, mockClient } from "../support/mock.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("item 4: numbers that drive timers", () => {
  it(
    "a session with a 7e6 s TTL renews on a clamped timer, " + "not every millisecond (old: 539 keepalives/s)",
    async () => {
      const { etcd, calls } = mockClient({ retries: 0 });
      const session = await etcd.session({ ttl: 7_000_000 });
      try {
        calls.length = 0;
        await sleep(300);
        // ttl/3 = 2.3e9 ms is past 2^31-1: unclamped, the timer fired after 1 ms and renewed in a loop.
        expect(calls.filter((path) => path === "/v3/lease/keepalive")).toEqual([]);
        expect(session.alive).toBe(true);
      } finally {
        await session.close();
      }
    },
  );

  it("the renewal timer is armed at 2^31-1 ms at most", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const spy = vi.spyOn(globalThis, "setTimeout");
    const { etcd } = mockClient({ retries: 0 });
    const session = await etcd.session({ ttl: 9_000_000_000 });
    const delays = spy.mock.calls.map((call) => call[1] ?? 0);
    expect(delays.length).toBeGreaterThan(0);
    expect(Math.max(...delays)).toBeLessThanOrEqual(2 ** 31 - 1);
    await session.close();
  });

  it.each([
    ["0", 0],
    ["above etcd's 9e9 s maximum", 9_000_000_001],
    ["a fraction", 1.5],
    ["NaN", Number.NaN],
    ["a string", "10"],
  ])("lease.grant and session refuse a TTL that is %s before sending (old: sent, or 0 passed)", async (_name, ttl) => {
    const { etcd, calls } = mockClient({ retries: 0 });
    expect((await rejection(() => etcd.lease.grant(ttl as number))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => etcd.session({ ttl: ttl as number }))).code).toBe("INVALID_ARGUMENT");
    // An adopted lease ignores ttl, but a bad one is still a mistake worth saying.
    expect((await rejection(() => etcd.session({ ttl: ttl as number, leaseId: "7" }))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => etcd.withLock("job", () => 1, { ttl: ttl as number }))).code).toBe(
      "INVALID_ARGUMENT",
    );
    expect(calls).toEqual([]);
  });

  it("etcd's own range of TTLs is accepted: 1 s and 9e9 s", async () => {
    const { etcd } = mockClient({ retries: 0 });
    expect((await etcd.lease.grant(1)).ttl).toBeGreaterThanOrEqual(1);
    expect((await etcd.lease.grant(9_000_000_000)).ttl).toBe(9_000_000_000);
  });

  it.each([0, 49, 60_001, 3e9, Number.NaN, Infinity, "500"])(
    "pollInterval %s is refused before joining the line (old: 0 and 3e9 polled ~500 times/s)",
    async (pollInterval) => {
      const { etcd, calls } = mockClient({ retries: 0 });
      const session = await etcd.session({ ttl: 10, keepAlive: "manual" });
      calls.length = 0;
      const error = await rejection(() =>
        session.mutex("job").lock({ wait: "poll", pollInterval: pollInterval as number }),
      );
      expect(error.code).toBe("INVALID_ARGUMENT");
      expect(error.message).toMatch(/pollInterval must be a number of milliseconds from 50 to 60000/);
      expect(
        (await rejection(() => session.election("e").campaign("v", { pollInterval: pollInterval as number }))).code,
      ).toBe("INVALID_ARGUMENT");
      expect(calls).toEqual([]);
      await session.close();
    },
  );

  it.each(["Watch", "", null])("wait %j is refused before joining the line, naming the two modes", async (wait) => {
    const { etcd, calls } = mockClient({ retries: 0 });
    const session = await etcd.session({ ttl: 10, keepAlive: "manual" });
    calls.length = 0;
    const error = await rejection(() => session.mutex("job").lock({ wait: wait as "watch" }));
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toMatch(/^wait must be "watch" or "poll", got /);
    expect(calls).toEqual([]);
    await session.close();
  });

  it(
    "the floor and the ceiling themselves are accepted; " + "a poll waiter at the floor reads at most ~20 times/s",
    async () => {
      const { etcd, calls, mock } = mockClient({ retries: 0 });
      const holder = await etcd.session({ ttl: 10, keepAlive: "manual" });
      const waiter = await etcd.session({ ttl: 10, keepAlive: "manual" });
      const held = await holder.mutex("job").lock();
      calls.length = 0;
      const controller = new AbortController();
      const waiting = waiter.mutex("job").lock({ wait: "poll", pollInterval: 50, signal: controller.signal });
      await sleep(500);
      controller.abort();
      await waiting.catch(() => {});
      const reads = calls.filter((path) => path === "/v3/kv/range").length;
      expect(reads).toBeGreaterThan(2);
      expect(reads).toBeLessThanOrEqual(12);
      const ceiling = await waiter.mutex("free").lock({ wait: "poll", pollInterval: 60_000 });
      await ceiling.unlock();
      await held.unlock();
      await holder.close();
      await waiter.close();
      expect(mock.keys("job/")).toEqual([]);
    },
  );
});

describe("item 5: lock, campaign and withLock timeouts are validated like the transport's", () => {
  it.each([
    ["NaN (old: waited forever)", Number.NaN],
    ["-1 (old: timed out at once)", -1],
    ["null (old: timed out at once)", null],
    ['"5" (old: became 5 ms)', "5"],
    ["an object", {}],
  ])("timeout %s is INVALID_ARGUMENT before any request", async (_name, timeout) => {
    const { etcd, calls } = mockClient({ retries: 0 });
    const session = await etcd.session({ ttl: 10, keepAlive: "manual" });
    calls.length = 0;
    const bad = { timeout: timeout as number };
    const refused = await rejection(() => session.mutex("job").lock(bad));
    expect(refused.code).toBe("INVALID_ARGUMENT");
    expect(refused.message).toMatch(/^timeout must be /);
    expect((await rejection(() => session.election("e").campaign("v", bad))).code).toBe("INVALID_ARGUMENT");
    expect(calls).toEqual([]);
    // withLock shares the check; it runs after its lease is granted (withLock's early checks are another item).
    expect((await rejection(() => etcd.withLock("job", () => 1, bad))).code).toBe("INVALID_ARGUMENT");
    await session.close();
  });

  it("0 still means try once (LOCKED when held), and Infinity means no limit", async () => {
    const { etcd } = mockClient({ retries: 0 });
    const a = await etcd.session({ ttl: 10, keepAlive: "manual" });
    const b = await etcd.session({ ttl: 10, keepAlive: "manual" });
    const held = await a.mutex("job").lock({ timeout: Infinity });
    expect((await rejection(() => b.mutex("job").lock({ timeout: 0 }))).code).toBe("LOCKED");
    const waiting = b.mutex("job").lock({ timeout: Infinity });
    expect(await stillPending(waiting, 100)).toBe(true);
    await held.unlock();
    const next = await within(2_000, "lock after release", waiting);
    expect(next.held).toBe(true);
    await a.close();
    await b.close();
  });
});

describe("item 7: mixed range forms", () => {
  it("delete({ key, prefix }) is refused and deletes nothing (old: prefix won, deleting every key)", async () => {
    const { etcd, mock, calls } = mockClient({ retries: 0 });
    await etcd.put("jobs/1", "a");
    await etcd.put("other", "b");
    calls.length = 0;
    // @ts-expect-error the forms do not mix, in types as at run time
    const error = await rejection(() => etcd.delete({ key: "jobs/1", prefix: "" }));
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toMatch(/not both/);
    expect(calls).toEqual([]);
    expect(mock.keys()).toEqual(["jobs/1", "other"]);
  });

  it("range({ prefix, end }) is refused (old: end silently dropped)", async () => {
    const { etcd, calls } = mockClient({ retries: 0 });
    // @ts-expect-error the forms do not mix
    expect((await rejection(() => etcd.range({ prefix: "a/", end: "b" }))).code).toBe("INVALID_ARGUMENT");
    // @ts-expect-error the forms do not mix
    expect((await rejection(() => etcd.range({ key: "a", end: "b", prefix: "a/" }))).code).toBe("INVALID_ARGUMENT");
    // @ts-expect-error get's options cannot carry a prefix
    expect((await rejection(() => etcd.get("a", { prefix: "" }))).code).toBe("INVALID_ARGUMENT");
    // @ts-expect-error the forms do not mix
    expect((await rejection(() => etcd.watch({ key: "a", prefix: "a/" }))).code).toBe("INVALID_ARGUMENT");
    const mixedDelete = () =>
      // @ts-expect-error the forms do not mix
      op.delete({ key: "a", prefix: "" });
    expect((await rejection(() => etcd.txn().then(mixedDelete()).commit())).code).toBe("INVALID_ARGUMENT");
    const mixedCompare = () =>
      // @ts-expect-error the forms do not mix
      cmp.version({ prefix: "a", end: "b" }, "==", 0);
    expect((await rejection(() => etcd.txn().if(mixedCompare()).commit())).code).toBe("INVALID_ARGUMENT");
    expect(calls).toEqual([]);
  });

  it("an option given as undefined is not given: { key, prefix: undefined } is a key", async () => {
    const { etcd } = mockClient({ retries: 0 });
    await etcd.put("k", "v");
    expect((await etcd.range({ key: "k", prefix: undefined })).count).toBe(1);
    expect((await etcd.range({ prefix: "k", key: undefined, end: undefined })).count).toBe(1);
  });
});

describe("item 9: option types, headers, UTF-16, namespace, redaction", () => {
  it.each([
    ["a CRLF value (old: every call UNAVAILABLE after 4 tries)", { "x-proxy": "a\r\nb: c" }],
    ["a non-string value", { "x-proxy": 5 }],
    ["an invalid name", { "x proxy": "a" }],
    ["a framing header", { "content-length": "5" }],
    ["one name twice in two cases", { "X-A": "1", "x-a": "2" }],
    ["a non-Latin-1 value", { "x-proxy": "☃" }],
    ["not an object", "x-proxy: a"],
  ])("headers with %s are refused at construction", (_name, headers) => {
    expect(() => new Etcd({ endpoints: [MOCK_ENDPOINT], headers: headers as Record<string, string> })).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT" }),
    );
  });

  it("valid headers are sent, lowercased", async () => {
    const { etcd, mock } = mockClient({ retries: 0 });
    let seen: Record<string, string> = {};
    const client = new Etcd({
      endpoints: [MOCK_ENDPOINT],
      headers: { "X-Proxy-Token": "abc def" },
      fetch: async (input, init) => {
        seen = init.headers;
        return mock.fetch(input, init as RequestInit);
      },
    });
    await client.get("k");
    expect(seen["x-proxy-token"]).toBe("abc def");
    void etcd;
  });

  it.each([
    ["requireLeader", { requireLeader: "false" }],
    ["maxResponseBytes", { maxResponseBytes: 0 }],
    ["maxResponseBytes", { maxResponseBytes: "1e6" }],
  ])("%s of the wrong type or range is refused at construction", (_name, options) => {
    expect(() => new Etcd({ endpoints: [MOCK_ENDPOINT], ...(options as object) })).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT" }),
    );
  });

  it("a signal that is not an AbortSignal is INVALID_ARGUMENT (old: a TypeError from addEventListener)", async () => {
    const { etcd, calls } = mockClient({ retries: 0 });
    const signal = {} as AbortSignal;
    expect((await rejection(() => etcd.get("k", { signal }))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => etcd.watch({ key: "k", signal }))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => etcd.session({ signal }))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => etcd.lease.grant(5, { signal: null as unknown as AbortSignal }))).code).toBe(
      "INVALID_ARGUMENT",
    );
    const session = await etcd.session({ ttl: 10, keepAlive: "manual" });
    calls.length = 0;
    expect((await rejection(() => session.mutex("job").lock({ signal }))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => session.election("e").campaign("v", { signal }))).code).toBe("INVALID_ARGUMENT");
    expect(calls).toEqual([]);
    await session.close();
  });

  it('flags must be booleans: "false" is refused, not sent as true (old: sent)', async () => {
    const { etcd, calls } = mockClient({ retries: 0 });
    const no = "false" as unknown as boolean;
    expect((await rejection(() => etcd.put("k", "v", { prevKv: no }))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => etcd.range({ prefix: "k", keysOnly: no }))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => etcd.range({ prefix: "k", countOnly: 1 as unknown as boolean }))).code).toBe(
      "INVALID_ARGUMENT",
    );
    expect((await rejection(() => etcd.get("k", { serializable: no }))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => etcd.delete("k", { prevKv: no }))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => etcd.compact(1, { physical: no }))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => etcd.lease.timeToLive("7", { keys: no }))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => etcd.txn().commit({ idempotent: no }))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => etcd.watch({ key: "k", noPut: no }))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => etcd.put("k", "v", { ignoreLease: no }))).code).toBe("INVALID_ARGUMENT");
    expect(calls).toEqual([]);
  });

  it('sort target and order must be own keys: "toString" is refused (old: silently no sort)', async () => {
    const { etcd, calls } = mockClient({ retries: 0 });
    const sort = (target: string, order?: string) => etcd.range({ prefix: "k", sort: { target, order } as never });
    expect((await rejection(() => sort("toString"))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => sort("key", "constructor"))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => sort("__proto__"))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(() => etcd.range({ prefix: "k", sort: null as never }))).code).toBe("INVALID_ARGUMENT");
    expect(calls).toEqual([]);
  });

  it(
    "strings with lone surrogates are refused as keys, " +
      "values and names (old: x\\uD800 and x\\uDFFF were one lock)",
    async () => {
      const { etcd, calls } = mockClient({ retries: 0 });
      expect((await rejection(() => etcd.put("x\uD800", "v"))).code).toBe("INVALID_ARGUMENT");
      expect((await rejection(() => etcd.put("k", "\uDFFFv"))).code).toBe("INVALID_ARGUMENT");
      expect((await rejection(() => etcd.get("a\uDC00b"))).code).toBe("INVALID_ARGUMENT");
      expect((await rejection(() => etcd.inspectLock("x\uDFFF"))).code).toBe("INVALID_ARGUMENT");
      expect(() => new Etcd({ endpoints: [MOCK_ENDPOINT], namespace: "ns\uD800/" })).toThrow(
        expect.objectContaining({ code: "INVALID_ARGUMENT" }),
      );
      const session = await etcd.session({ ttl: 10, keepAlive: "manual" });
      calls.length = 0;
      expect((await rejection(() => session.mutex("x\uD800").lock())).code).toBe("INVALID_ARGUMENT");
      expect((await rejection(() => session.mutex("x\uDFFF").lock())).code).toBe("INVALID_ARGUMENT");
      expect(calls).toEqual([]);
      // A well-formed pair is fine.
      await etcd.put("x\uD83D\uDE00", "v");
      expect((await etcd.get("x😀"))?.value).toBe("v");
      await session.close();
    },
  );

  it(
    "timeToLive({ keys: true }) shows only the namespace's keys, " +
      "stripped (old: other namespaces' keys, unstripped)",
    async () => {
      const { mock, fetch } = mockClient({ retries: 0 });
      const raw = new Etcd({ endpoints: [MOCK_ENDPOINT], fetch });
      const scoped = new Etcd({ endpoints: [MOCK_ENDPOINT], fetch, namespace: "tenant-a/" });
      const { id } = await raw.lease.grant(30);
      await raw.put("tenant-a/job", "1", { lease: id });
      await raw.put("tenant-b/secret", "2", { lease: id });
      await raw.put("tenant-ab", "3", { lease: id });
      const seen = await scoped.lease.timeToLive(id, { keys: true });
      expect(seen.keys).toEqual(["job"]);
      expect(seen.keyBytes).toEqual([new TextEncoder().encode("job")]);
      expect((await raw.lease.timeToLive(id, { keys: true })).keys.sort()).toEqual([
        "tenant-a/job",
        "tenant-ab",
        "tenant-b/secret",
      ]);
      expect(mock.keys()).toHaveLength(3);
    },
  );

  it("a Uint8Array namespace is copied (old: changing the array moved every key)", async () => {
    const { mock, fetch } = mockClient({ retries: 0 });
    const namespace = new TextEncoder().encode("a/");
    const etcd = new Etcd({ endpoints: [MOCK_ENDPOINT], fetch, namespace });
    namespace[0] = "b".charCodeAt(0);
    await etcd.put("k", "v");
    expect(mock.keys()).toEqual(["a/k"]);
    etcd.config.namespace[0] = "c".charCodeAt(0);
    await etcd.put("k2", "v");
    expect(mock.keys()).toEqual(["a/k", "a/k2"]);
  });

  it("etcd.config and util.inspect never show the password (old: the getter returned it)", () => {
    const etcd = new Etcd({ endpoints: [MOCK_ENDPOINT], auth: { username: "app", password: "s3cret-pw" } });
    expect(etcd.config.auth).toEqual({ username: "app", password: "[redacted]" });
    const printed = [
      inspect(etcd, { depth: 10, showHidden: true }),
      JSON.stringify(etcd),
      inspect(etcd.config),
      String(etcd),
    ].join("\n");
    expect(printed).not.toContain("s3cret-pw");
    expect(printed).toContain("[redacted]");
  });

  it("with no global fetch a call is INVALID_ARGUMENT at once, with no retries", async () => {
    vi.stubGlobal("fetch", undefined);
    try {
      const started = performance.now();
      const error = await rejection(() => new Etcd({ endpoints: [MOCK_ENDPOINT], retries: 5 }).get("k"));
      expect(error.code).toBe("INVALID_ARGUMENT");
      expect(error.message).toMatch(/no global fetch/);
      expect(performance.now() - started).toBeLessThan(200);
    } finally {
      vi.unstubAllGlobals();
    }
  });
});
