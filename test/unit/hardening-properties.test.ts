// Every public method's arguments, fuzzed: each bad input must be refused with an EtcdError whose code is
// INVALID_ARGUMENT, before any request (fetch calls are counted), within a bound, and without writing
// anything (the in-memory member's revision, keys and leases are unchanged).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { EtcdOperator } from "../../src/operate/index.js";
import { cmp, Etcd, EtcdError, type EtcdOptions, type LockTicket, op } from "../../src/index.js";
import { within } from "../support/async.js";
import { MOCK_ENDPOINT, type MockClient, mockClient } from "../support/mock.js";

const RUNS = { numRuns: 60 };

// --- bad values, by what the argument should have been ------------------------------------------------------

const anything = fc.oneof(
  fc.anything({ withBigInt: true, withNullPrototype: true, withBoxedValues: true }),
  fc.constant(null),
);
/** Anything at all except the values `valid` accepts. */
const anythingBut = (valid: (value: unknown) => boolean) => anything.filter((value) => !valid(value));

const isBytes = (value: unknown) => typeof value === "string" || value instanceof Uint8Array;
const loneSurrogate = fc
  .tuple(
    fc.string({ maxLength: 5 }),
    fc.constantFrom("\uD800", "\uDBFF", "\uDC00", "\uDFFF"),
    fc.string({ maxLength: 5 }),
  )
  .map(([a, lone, b]) => `${a}${lone}${b.replace(/^[\uDC00-\uDFFF]/, "x")}`)
  .filter((text) => !(text as string & { isWellFormed(): boolean }).isWellFormed());

/** Not a key: a non-Bytes value, a string with a lone surrogate, or the empty key etcd refuses. */
const badKey = fc.oneof(anythingBut(isBytes), loneSurrogate, fc.constant(""), fc.constant(new Uint8Array(0)));
/** Not a value (an empty one is a fine value). */
const badValue = fc.oneof(
  anythingBut((value) => isBytes(value) || value === undefined),
  loneSurrogate,
);
/** Not a revision, limit or count. */
const badCount = fc.oneof(
  fc.integer({ max: -1 }),
  fc.double({ noNaN: true }).filter((n) => !Number.isInteger(n)),
  fc.constantFrom(Number.NaN, Infinity, -Infinity, Number.MAX_SAFE_INTEGER + 1),
  anythingBut((value) => typeof value === "number" || value === undefined),
);
const badFlag = anythingBut((value) => value === undefined || typeof value === "boolean");
const badSignal = anythingBut((value) => value === undefined || value instanceof AbortSignal);
/** Not a call's timeout: positive milliseconds or Infinity. */
const badTimeout = fc.oneof(
  fc.integer({ max: 0 }),
  fc.constantFrom(Number.NaN, -Infinity),
  anythingBut((value) => typeof value === "number" || value === undefined),
);
/** Not a lock's timeout, where 0 means "try once". */
const badLockTimeout = badTimeout.filter((value) => value !== 0);
const badLeaseId = fc.oneof(
  fc.constantFrom("-1", "0x10", "1e3", " 7", "7.0", "", "9223372036854775808", "abc"),
  fc.bigInt({ max: -1n }),
  fc.integer(),
  anythingBut((value) => typeof value === "string" || typeof value === "bigint" || typeof value === "number"),
);
/** As an option, undefined is "not given", so it is no bad value there. */
const badLeaseIdOption = badLeaseId.filter((value) => value !== undefined);
const badTtl = fc.oneof(
  fc.integer({ max: 0 }),
  fc.constantFrom(9_000_000_001, 1.5, Number.NaN, Infinity),
  anythingBut((value) => typeof value === "number" || value === undefined),
);
/** Not `{ target?, order? }` of own keys. */
const badSort = fc.oneof(
  fc.record({ target: fc.constantFrom("toString", "constructor", "__proto__", "KEY", "create", "") }),
  fc.record({
    target: fc.constantFrom("key", "value"),
    order: fc.constantFrom("valueOf", "hasOwnProperty", "ASCEND", "up"),
  }),
  anythingBut((value) => value === undefined || (typeof value === "object" && value !== null && !Array.isArray(value))),
);
/** A range in two forms at once. */
const mixedRange = fc.oneof(
  fc.record({ key: fc.constantFrom("a", "k/1"), prefix: fc.constantFrom("", "k/") }),
  fc.record({ prefix: fc.constantFrom("", "k/"), end: fc.constantFrom("z", "\0") }),
  fc.record({ key: fc.constant("a"), end: fc.constant("b"), prefix: fc.constant("a") }),
);
const badRange = fc.oneof(
  mixedRange,
  badKey.map((key) => ({ key })),
  badKey.map((prefix) => ({ prefix })).filter((r) => r.prefix !== "" && !(r.prefix instanceof Uint8Array)),
);
const badOperator = anythingBut((value) => value === "==" || value === "!=" || value === "<" || value === ">");
const badPollInterval = fc.oneof(
  fc.integer({ min: -10, max: 49 }),
  fc.integer({ min: 60_001 }),
  fc.constantFrom(Number.NaN, Infinity),
  anythingBut((value) => typeof value === "number" || value === undefined),
);
const badWait = anythingBut((value) => value === undefined || value === "watch" || value === "poll");
// null is left out: the lock layer reads `keepAlive ?? "auto"`, so null means the default there (the lock
// rewrite decides whether to keep that); every option this layer owns refuses null.
const badKeepAlive = anythingBut(
  (value) => value === undefined || value === null || value === "auto" || value === "manual",
);
const badName = fc.oneof(
  anythingBut((value) => typeof value === "string"),
  fc.constant(""),
  loneSurrogate,
);

/** One bad option among otherwise good call options. */
const badCallOptions = fc.oneof(fc.record({ signal: badSignal }), fc.record({ timeout: badTimeout }));

const badRangeOptions = fc.oneof(
  badCallOptions,
  ...(["limit", "revision", "minModRevision", "maxModRevision", "minCreateRevision", "maxCreateRevision"] as const).map(
    (name) => badCount.map((value) => ({ [name]: value })),
  ),
  ...(["serializable", "keysOnly", "countOnly"] as const).map((name) => badFlag.map((value) => ({ [name]: value }))),
  badSort.map((sort) => ({ sort })),
);

// --- checking one bad call ----------------------------------------------------------------------------------

function state(ctx: MockClient) {
  return { revision: ctx.mock.revision, keys: ctx.mock.keys(), leases: ctx.mock.leases().map((lease) => lease.id) };
}

/** The call must fail with INVALID_ARGUMENT, promptly, sending nothing and writing nothing. */
async function refused(ctx: MockClient, call: () => unknown): Promise<void> {
  const before = state(ctx);
  const sent = ctx.calls.length;
  const outcome = await within(
    2_000,
    "a bad call",
    (async () => {
      try {
        await call();
      } catch (error) {
        return error;
      }
      return undefined;
    })(),
  );
  expect(outcome, "the bad call succeeded").toBeDefined();
  expect(outcome, String(outcome)).toBeInstanceOf(EtcdError);
  expect((outcome as EtcdError).code, (outcome as EtcdError).message).toBe("INVALID_ARGUMENT");
  expect(ctx.calls.slice(sent), "requests sent").toEqual([]);
  expect(state(ctx)).toEqual(before);
}

/** Every call `calls` draws is refused on a fresh member (holding key `k/1` when `seeded`, its put not counted). */
async function refusesEvery(
  calls: fc.Arbitrary<(etcd: EtcdOperator) => unknown>,
  { seeded = false } = {},
): Promise<void> {
  await fc.assert(
    fc.asyncProperty(calls, async (call) => {
      const ctx = mockClient({ retries: 0 });
      if (seeded) {
        await ctx.etcd.put("k/1", "v");
        ctx.calls.length = 0;
      }
      await refused(ctx, () => call(ctx.etcd));
    }),
    RUNS,
  );
}

/** A fresh member with a key and a manual session in it; the setup's requests are not counted. */
async function withSession() {
  const ctx = mockClient({ retries: 0 });
  await ctx.etcd.put("k/1", "v");
  const session = await ctx.etcd.session({ ttl: 30, keepAlive: "manual" });
  ctx.calls.length = 0;
  return { ...ctx, session };
}

const any = <T>(value: unknown) => value as T;

/** `make(value)`, printed by fast-check as `label(value)` when it finds a counterexample. */
const labelled =
  <V, F extends object>(label: string, make: (value: V) => F) =>
  (value: V): F =>
    Object.assign(make(value), { toString: () => `${label}(${fc.stringify(value)})` });

// --- the properties ------------------------------------------------------------------------------------------

describe("bad arguments are refused before any request", () => {
  it("new Etcd(options)", async () => {
    const badOptions = fc.oneof(
      fc.record({ endpoints: anythingBut((value) => typeof value === "string" || Array.isArray(value)) }),
      fc.record({
        endpoints: fc
          .array(anything, { minLength: 1, maxLength: 2 })
          .filter((list) => list.some((e) => typeof e !== "string")),
      }),
      fc.record({ endpoints: fc.constant([MOCK_ENDPOINT]), timeout: badTimeout }),
      fc.record({ endpoints: fc.constant([MOCK_ENDPOINT]), retries: badCount }),
      fc.record({ endpoints: fc.constant([MOCK_ENDPOINT]), requireLeader: badFlag }),
      fc.record({ endpoints: fc.constant([MOCK_ENDPOINT]), maxResponseBytes: fc.oneof(badCount, fc.constant(0)) }),
      fc.record({
        endpoints: fc.constant([MOCK_ENDPOINT]),
        namespace: badValue.filter((value) => value !== undefined),
      }),
      fc.record({
        endpoints: fc.constant([MOCK_ENDPOINT]),
        headers: fc.oneof(
          anythingBut((value) => value === undefined || (typeof value === "object" && value !== null)),
          fc.dictionary(
            fc.constantFrom("x-a", "x b", "content-length"),
            anythingBut((v) => typeof v === "string" && /^[\x21-\x7e]+$/.test(v)),
            { minKeys: 1 },
          ),
        ),
      }),
      fc.record({ endpoints: fc.constant([MOCK_ENDPOINT]), auth: anythingBut((value) => value === undefined) }),
      fc.record({
        endpoints: fc.constant([MOCK_ENDPOINT]),
        fetch: anythingBut((value) => value === undefined || typeof value === "function"),
      }),
    );
    await fc.assert(
      fc.asyncProperty(badOptions, async (options) => {
        const ctx = mockClient({ retries: 0 });
        await refused(ctx, () => new Etcd({ fetch: ctx.fetch, ...any<EtcdOptions>(options) }));
      }),
      RUNS,
    );
  });

  it("get, range, put, delete, compact", async () => {
    const calls = fc.oneof(
      badKey.map((key) => (e: Etcd) => e.get(any(key))),
      badRangeOptions.map((options) => (e: Etcd) => e.get("k/1", any(options))),
      badRange.map((range) => (e: Etcd) => e.range(any(range))),
      badRangeOptions.map((options) => (e: Etcd) => e.range({ prefix: "k/", ...any<object>(options) })),
      anythingBut((value) => isBytes(value) || (typeof value === "object" && value !== null)).map(
        (query) => (e: Etcd) => e.range(any(query)),
      ),
      badKey.map((key) => (e: Etcd) => e.put(any(key), "v")),
      badValue.filter((value) => value !== undefined).map((value) => (e: Etcd) => e.put("k/2", any(value))),
      fc.constant((e: Etcd) => e.put("k/2", undefined)),
      badLeaseIdOption.map((lease) => (e: Etcd) => e.put("k/2", "v", { lease: any(lease) })),
      fc
        .oneof(
          ...(["prevKv", "ignoreValue", "ignoreLease"] as const).map((name) =>
            badFlag.map((value) => ({ [name]: value })),
          ),
        )
        .map((options) => (e: Etcd) => e.put("k/2", "v", any(options))),
      badCallOptions.map((options) => (e: Etcd) => e.put("k/2", "v", any(options))),
      fc.oneof(badKey, badRange).map((query) => (e: Etcd) => e.delete(any(query))),
      badFlag.map((prevKv) => (e: Etcd) => e.delete("k/1", { prevKv: any(prevKv) })),
      badCallOptions.map((options) => (e: Etcd) => e.delete({ prefix: "k/" }, any(options))),
      badCount.map((revision) => (e: Etcd) => e.compact(any(revision))),
      badFlag.map((physical) => (e: Etcd) => e.compact(1, { physical: any(physical) })),
    );
    await refusesEvery(calls, { seeded: true });
  });

  it("txn, cmp and op", async () => {
    const compares = fc.oneof(
      fc.oneof(badKey, badRange).map(labelled("cmp.version", (key) => () => cmp.version(any(key), "==", 0))),
      badOperator.map(labelled("cmp.value operator", (operator) => () => cmp.value("k/1", any(operator), "v"))),
      badValue
        .filter((value) => value !== undefined)
        .map(labelled("cmp.value value", (value) => () => cmp.value("k/1", "==", any(value)))),
      badCount.map(labelled("cmp.version n", (n) => () => cmp.version("k/1", ">", any(n)))),
      badCount.map(labelled("cmp.createRevision", (n) => () => cmp.createRevision("k/1", "<", any(n)))),
      badCount.map(labelled("cmp.modRevision", (n) => () => cmp.modRevision("k/1", "!=", any(n)))),
      badLeaseId.map(labelled("cmp.lease", (lease) => () => cmp.lease("k/1", "==", any(lease)))),
    );
    const ops = fc.oneof(
      fc.oneof(badKey, badRange).map(labelled("op.get", (query) => () => op.get(any(query)))),
      badRangeOptions
        .filter((o) => !("signal" in o) && !("timeout" in o))
        .map(labelled("op.get options", (options) => () => op.get({ prefix: "k/", ...any<object>(options) }))),
      badKey.map(labelled("op.put key", (key) => () => op.put(any(key), "v"))),
      badLeaseIdOption.map(labelled("op.put lease", (lease) => () => op.put("k/2", "v", { lease: any(lease) }))),
      fc.oneof(badKey, badRange).map(labelled("op.delete", (query) => () => op.delete(any(query)))),
    );
    const calls = fc.oneof(
      compares.map(labelled("if", (make) => (e: Etcd) => e.txn().if(make()).then(op.put("k/2", "v")).commit())),
      ops.map(labelled("then", (make) => (e: Etcd) => e.txn().then(op.put("k/3", "v"), make()).commit())),
      ops.map(
        labelled(
          "nested then",
          (make) => (e: Etcd) =>
            e
              .txn()
              .then(op.txn([], [make()]))
              .commit(),
        ),
      ),
      compares.map(
        labelled(
          "nested if",
          (make) => (e: Etcd) =>
            e
              .txn()
              .then(op.txn([make()], [op.put("k/3", "v")]))
              .commit(),
        ),
      ),
      anything.map((item) => (e: Etcd) => e.txn().if(any(item)).commit()),
      anything.map((item) => (e: Etcd) => e.txn().then(op.put("k/3", "v"), any<never>(item)).commit()),
      fc
        .oneof(
          badCallOptions,
          badFlag.map((idempotent) => ({ idempotent })),
        )
        .map((options) => (e: Etcd) => e.txn().then(op.put("k/3", "v")).commit(any(options))),
      fc.constant((e: Etcd) =>
        e
          .txn()
          .then(op.put("k/3", "v"))
          .if(cmp.version("k/1", "==", 0))
          .commit(),
      ),
    );
    await refusesEvery(calls, { seeded: true });
  });

  it("lease calls", async () => {
    const calls = fc.oneof(
      badTtl.filter((ttl) => ttl !== undefined).map((ttl) => (e: Etcd) => e.lease.grant(any(ttl))),
      badLeaseIdOption.map((id) => (e: Etcd) => e.lease.grant(30, { id: any(id) })),
      badLeaseId.map((id) => (e: Etcd) => e.lease.revoke(any(id))),
      badLeaseId.map((id) => (e: Etcd) => e.lease.keepAliveOnce(any(id))),
      badLeaseId.map((id) => (e: Etcd) => e.lease.timeToLive(any(id))),
      badFlag.map((keys) => (e: Etcd) => e.lease.timeToLive("7", { keys: any(keys) })),
      badCallOptions.map((options) => (e: Etcd) => e.lease.list(any(options))),
      badCallOptions.map((options) => (e: Etcd) => e.lease.grant(30, any(options))),
      badCallOptions.map((options) => (e: Etcd) => e.lease.revoke("7", any(options))),
    );
    await refusesEvery(calls);
  });

  it("watch", async () => {
    const badQuery = fc.oneof(
      badRange,
      badCallOptions.map((options) => ({ key: "k/1", ...options })),
      badCount.map((startRevision) => ({ prefix: "k/", startRevision })),
      badCount.map((retries) => ({ prefix: "k/", retries })),
      fc.oneof(
        ...(["prevKv", "noPut", "noDelete", "progressNotify"] as const).map((name) =>
          badFlag.map((value) => ({ prefix: "k/", [name]: value })),
        ),
      ),
    );
    await fc.assert(
      fc.asyncProperty(badQuery, async (query) => {
        const ctx = mockClient({ retries: 0 });
        await refused(ctx, async () => {
          const controller = new AbortController();
          try {
            for await (const _ of ctx.etcd.watch(any({ signal: controller.signal, ...query }))) break;
          } finally {
            controller.abort();
          }
        });
      }),
      RUNS,
    );
  });

  it("session options", async () => {
    const badOptions = fc.oneof(
      badTtl.map((ttl) => ({ ttl })),
      badKeepAlive.map((keepAlive) => ({ keepAlive })),
      badLeaseIdOption.map((leaseId) => ({ leaseId })),
      badCallOptions,
      fc.record({ leaseId: fc.constant("7"), signal: badSignal }),
    );
    await fc.assert(
      fc.asyncProperty(badOptions, async (options) => {
        const ctx = mockClient({ retries: 0 });
        await refused(ctx, () => ctx.etcd.session(any(options)));
      }),
      RUNS,
    );
  });

  it("mutex, lock and tryLock, election and campaign, session and lock calls", async () => {
    const badLockOptions = fc.oneof(
      badSignal.map((signal) => ({ signal })),
      badLockTimeout.map((timeout) => ({ timeout })),
      badWait.map((wait) => ({ wait })),
      badPollInterval.map((pollInterval) => ({ wait: "poll", pollInterval })),
    );
    type Ctx = Awaited<ReturnType<typeof withSession>>;
    const calls = fc.oneof(
      badName.map((name) => (c: Ctx) => c.session.mutex(any(name)).lock()),
      badName.map((name) => (c: Ctx) => c.session.mutex(any(name)).tryLock()),
      badLockOptions.map((options) => (c: Ctx) => c.session.mutex("m").lock(any(options))),
      // tryLock's own `timeout` is replaced by 0 (try once), so only its signal is checked.
      badSignal.map((signal) => (c: Ctx) => c.session.mutex("m").tryLock({ signal: any(signal) })),
      badName.map((name) => (c: Ctx) => c.session.election(any(name)).campaign("v")),
      badLockOptions.map((options) => (c: Ctx) => c.session.election("e").campaign("v", any(options))),
      badCallOptions.map((options) => (c: Ctx) => c.session.election("e").leader(any(options))),
      badSignal.map((signal) => async (c: Ctx) => {
        for await (const _ of c.session.election("e").observe({ signal: any(signal) })) break;
      }),
      badCallOptions.map((options) => (c: Ctx) => c.session.renew(any(options))),
    );
    await fc.assert(
      fc.asyncProperty(calls, async (call) => {
        const ctx = await withSession();
        await refused(ctx, () => call(ctx));
      }),
      RUNS,
    );
  });

  it("a held lock's unlock and renew, and an election's proclaim and resign", async () => {
    const calls = fc.oneof(
      badCallOptions.map((options) => (held: Held) => held.lock.unlock(any(options))),
      badCallOptions.map((options) => (held: Held) => held.lock.renew(any(options))),
      badValue
        .filter((value) => value !== undefined)
        .map((value) => (held: Held) => held.election.proclaim(any(value))),
      badCallOptions.map((options) => (held: Held) => held.election.proclaim("v2", any(options))),
      badCallOptions.map((options) => (held: Held) => held.election.resign(any(options))),
    );
    type Held = { lock: Awaited<ReturnType<Lockable["lock"]>>; election: ReturnType<Ctx["session"]["election"]> };
    type Ctx = Awaited<ReturnType<typeof withSession>>;
    type Lockable = ReturnType<Ctx["session"]["mutex"]>;
    await fc.assert(
      fc.asyncProperty(calls, async (call) => {
        const ctx = await withSession();
        const lock = await ctx.session.mutex("held").lock();
        const election = ctx.session.election("e");
        await election.campaign("v1");
        ctx.calls.length = 0;
        await refused(ctx, () => call({ lock, election }));
      }),
      RUNS,
    );
  });

  it("withLock: name, fn, and the options its lease checks (ttl, keepAlive, lease, signal)", async () => {
    const badCall = fc.oneof(
      badName
        .filter((name) => typeof name !== "string" || name === "")
        .map((name) => ({ name, fn: () => 1, options: {} })),
      anythingBut((value) => typeof value === "function").map((fn) => ({ name: "job", fn, options: {} })),
      // null is left out: withLock reads `ttl ?? 60`, so null means the default there (see badKeepAlive).
      badTtl.filter((ttl) => ttl !== null).map((ttl) => ({ name: "job", fn: () => 1, options: { ttl } })),
      badKeepAlive.map((keepAlive) => ({ name: "job", fn: () => 1, options: { keepAlive } })),
      anythingBut((value) => value === undefined || value === null || value === "shared" || value === "per-call").map(
        (lease) => ({ name: "job", fn: () => 1, options: { lease } }),
      ),
      badSignal.map((signal) => ({ name: "job", fn: () => 1, options: { signal } })),
    );
    await fc.assert(
      fc.asyncProperty(badCall, async ({ name, fn, options }) => {
        const ctx = mockClient({ retries: 0 });
        await refused(ctx, () => ctx.etcd.withLock(any(name), any(fn), any(options)));
      }),
      RUNS,
    );
  });

  it("recipes: semaphore, rwlock, lockAll, withSemaphore, withLocks, inspectSemaphore", async () => {
    const badLockOptions = fc.oneof(
      badSignal.map((signal) => ({ signal })),
      badLockTimeout.map((timeout) => ({ timeout })),
      badWait.map((wait) => ({ wait })),
      badPollInterval.map((pollInterval) => ({ wait: "poll", pollInterval })),
    );
    // Objects are left out: permitsArg prints the value with String(), a TypeError for some (listed below).
    const badPermits = fc.oneof(
      fc.integer({ max: 0 }),
      fc.constantFrom(1.5, Number.NaN, Infinity),
      anythingBut((value) => typeof value === "number" || typeof value === "object"),
    );
    const badNames = fc.oneof(
      anythingBut((value) => Array.isArray(value)),
      fc.constant([]),
      fc.array(badName, { minLength: 1, maxLength: 3 }),
      fc.constant(["a", "a"]),
    );
    type Ctx = Awaited<ReturnType<typeof withSession>>;
    const calls = fc.oneof(
      badName.map(
        labelled("semaphore name", (name) => (c: Ctx) => c.session.semaphore(any(name), { permits: 2 }).acquire()),
      ),
      badPermits.map(
        labelled(
          "semaphore permits",
          (permits) => (c: Ctx) => c.session.semaphore("s", { permits: any(permits) }).acquire(),
        ),
      ),
      badLockOptions.map(
        labelled(
          "semaphore acquire",
          (options) => (c: Ctx) => c.session.semaphore("s", { permits: 2 }).acquire(any(options)),
        ),
      ),
      badName.map(labelled("rwlock name", (name) => (c: Ctx) => c.session.rwlock(any(name)).readLock())),
      badLockOptions.map(labelled("readLock", (options) => (c: Ctx) => c.session.rwlock("rw").readLock(any(options)))),
      badLockOptions.map(
        labelled("writeLock", (options) => (c: Ctx) => c.session.rwlock("rw").writeLock(any(options))),
      ),
      badNames.map(labelled("lockAll names", (names) => (c: Ctx) => c.session.lockAll(any(names)))),
      badLockOptions.map(
        labelled("lockAll options", (options) => (c: Ctx) => c.session.lockAll(["a", "b"], any(options))),
      ),
      badName
        .filter((name) => typeof name !== "string" || name === "")
        .map(labelled("withSemaphore name", (name) => (c: Ctx) => c.etcd.withSemaphore(any(name), 2, () => 1))),
      badPermits.map(
        labelled("withSemaphore permits", (permits) => (c: Ctx) => c.etcd.withSemaphore("s", any(permits), () => 1)),
      ),
      anythingBut((value) => typeof value === "function").map(
        labelled("withLocks fn", (fn) => (c: Ctx) => c.etcd.withLocks(["a", "b"], any(fn))),
      ),
      badNames
        .filter((names) => !Array.isArray(names) || names.every((n) => typeof n !== "string" || n === ""))
        .map(labelled("withLocks names", (names) => (c: Ctx) => c.etcd.withLocks(any(names), () => 1))),
      badName.map(labelled("inspectSemaphore", (name) => (c: Ctx) => c.etcd.inspectSemaphore(any(name)))),
    );
    await fc.assert(
      fc.asyncProperty(calls, async (call) => {
        const ctx = await withSession();
        await refused(ctx, () => call(ctx));
      }),
      RUNS,
    );
  });

  it("inspectLock", async () => {
    const calls = fc.oneof(
      badName.map((name) => (e: EtcdOperator) => e.inspectLock(any(name))),
      badCallOptions.map((options) => (e: EtcdOperator) => e.inspectLock("job", any(options))),
    );
    await refusesEvery(calls);
  });

  it("resumeLock: tickets and options whose checks come before its reads", async () => {
    const good: LockTicket = { name: "job", key: "job/7", leaseId: "7", revision: 5, secret: "s" };
    const badTicket = fc.oneof(
      anythingBut((value) => typeof value === "object" && value !== null),
      badName.filter((name) => typeof name !== "string" || name === "").map((name) => ({ ...good, name })),
      anythingBut((value) => typeof value === "string").map((key) => ({ ...good, key })),
      // A key may name another lease than the ticket's (a resumed lock keeps its key on its new lease), but it
      // is always <name>/<lease ID in hex>.
      fc.constantFrom("other/7", "job/07", "job/x7", "job/7/8").map((key) => ({ ...good, key })),
      badLeaseId.map((leaseId) => ({ ...good, leaseId })),
      fc
        .oneof(fc.integer({ max: 0 }), fc.constantFrom(1.5, Number.NaN, "5"))
        .map((revision) => ({ ...good, revision })),
    );
    const calls = fc.oneof(
      badTicket.map((ticket) => (e: Etcd) => e.resumeLock(any(ticket))),
      // Plain values only: resume.ts prints an object keepAlive with String(), a TypeError for some (listed below).
      badKeepAlive
        .filter((value) => typeof value !== "object")
        .map((keepAlive) => (e: Etcd) => e.resumeLock(good, { keepAlive: any(keepAlive) })),
    );
    await refusesEvery(calls);
  });
});

// The lock layer's own argument checks: refused before its first request, typed, whatever the value.
describe("bad arguments of the lock layer are refused before its first request", () => {
  it(
    "withLock: timeout, wait, pollInterval and a name " +
      "with a lone surrogate are checked before the lease is granted",
    async () => {
      const badOptions = fc.oneof(
        loneSurrogate.map((name) => ({ name, fn: () => 1, options: {} })),
        badLockTimeout.map((timeout) => ({ name: "job", fn: () => 1, options: { timeout } })),
        badWait.map((wait) => ({ name: "job", fn: () => 1, options: { wait } })),
        badPollInterval.map((pollInterval) => ({ name: "job", fn: () => 1, options: { wait: "poll", pollInterval } })),
      );
      await fc.assert(
        fc.asyncProperty(badOptions, async ({ name, fn, options }) => {
          const ctx = mockClient({ retries: 0 });
          await refused(ctx, () => ctx.etcd.withLock(any(name), any(fn), any(options)));
        }),
        { numRuns: 20 },
      );
    },
  );

  it("resumeLock: a ticket name with a lone surrogate sends nothing", async () => {
    await fc.assert(
      fc.asyncProperty(loneSurrogate, async (name) => {
        const ctx = mockClient({ retries: 0 });
        await refused(ctx, () =>
          ctx.etcd.resumeLock({ name, key: `${name}/7`, leaseId: "7", revision: 5, secret: "s" }),
        );
      }),
      { numRuns: 10 },
    );
  });

  it("resumeLock: a keepAlive object without a prototype is INVALID_ARGUMENT", async () => {
    const ctx = mockClient({ retries: 0 });
    await refused(ctx, () =>
      ctx.etcd.resumeLock(
        { name: "job", key: "job/7", leaseId: "7", revision: 5, secret: "s" },
        { keepAlive: any(Object.create(null)) },
      ),
    );
  });

  it("semaphore permits: an object without a prototype is INVALID_ARGUMENT", async () => {
    const ctx = await withSession();
    await refused(ctx, () => ctx.session.semaphore("s", { permits: any(Object.create(null)) }).acquire());
  });

  it("campaign: a value that is not Bytes is INVALID_ARGUMENT", async () => {
    await fc.assert(
      fc.asyncProperty(anythingBut(isBytes), async (value) => {
        const ctx = await withSession();
        await refused(ctx, () => ctx.session.election("e").campaign(any(value)));
      }),
      { numRuns: 10 },
    );
  });
});
