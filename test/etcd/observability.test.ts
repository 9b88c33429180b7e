// diagnostics channels and etcd-edge/otel against a real member: what a raw subscriber sees for every recipe,
// the spans etcd-edge/otel makes and how they nest under the caller's span, its metrics, and, on a member with
// auth enabled, that no password, auth token, ticket secret or value reaches a channel message, a span or a
// metric.
import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Fetch, op } from "../../src/index.js";
import { instrument, type Instrumentation, SCHEMA_URL } from "../../src/otel/index.js";
import { VERSION } from "../../src/version.js";
import { until } from "../support/async.js";
import { type ChannelLog, logChannels, spell } from "../support/channels.js";
import { client, sharedEndpoint, uniqueName } from "../support/etcd.js";
import { closedPortUrl } from "../support/loopback.js";
import { memoryTelemetry, type MemoryTelemetry } from "../support/otel.js";
import { addUser, enableAuth, type EtcdMember, startEtcd } from "./harness.js";

/** A traced call that succeeded, as a subscriber sees it. */
const OK = ["start", "end", "asyncStart", "asyncEnd"];
/** A traced call that failed. */
const FAILED = ["start", "end", "error", "asyncStart", "asyncEnd"];

let log: ChannelLog | undefined;
let telemetry: MemoryTelemetry | undefined;
let handle: Instrumentation | undefined;
afterEach(async () => {
  log?.stop();
  handle?.disable();
  await telemetry?.close();
  log = telemetry = handle = undefined;
});

function instrumented(): MemoryTelemetry {
  telemetry = memoryTelemetry();
  handle = instrument({ tracerProvider: telemetry.tracerProvider, meterProvider: telemetry.meterProvider });
  return telemetry;
}

const named = (name: string) => (message: Record<string, unknown>) => message.name === name;

describe("diagnostics channels on real etcd", () => {
  it("every recipe publishes its acquisition and its release, with its kind, name and fencing token", async () => {
    log = logChannels();
    const etcd = client();
    const session = await etcd.session({ ttl: 20 });
    const base = uniqueName("channels");
    try {
      const lock = await session.mutex(`${base}/m`).lock();
      await lock.unlock();
      const election = session.election(`${base}/e`);
      await election.campaign("me");
      const elected = election.revision;
      await election.resign();
      const permit = await session.semaphore(`${base}/s`, { permits: 2 }).acquire();
      await permit.release();
      const reader = await session.rwlock(`${base}/rw`).readLock();
      await reader.unlock();
      const writer = await session.rwlock(`${base}/rw`).writeLock();
      await writer.unlock();
      const both = await session.lockAll([`${base}/a`, `${base}/b`]);
      await both.unlock();
      const writing = await session.mutex(`${base}/w`).lock();
      await writing.unlockWith([op.put(`${base}/w-data`, "v")]);
      const ticketed = await session.mutex(`${base}/t`).lock();
      const resumed = await etcd.resumeLock(ticketed.ticket());
      await resumed.unlock();
      await resumed.session.close();

      const acquired = (name: string) =>
        log!.seen.filter((s) => s.event === "lock:asyncEnd" && s.message.name === name).map((s) => s.message);
      const released = (name: string) =>
        log!.seen.filter((s) => s.event === "release:asyncEnd" && s.message.name === name).map((s) => s.message);
      const cases: Array<[string, string, number | undefined]> = [
        [`${base}/m`, "lock", lock.revision],
        [`${base}/e`, "election", elected],
        [`${base}/s`, "semaphore", permit.revision],
        [`${base}/a, ${base}/b`, "lockAll", both.revision],
        [`${base}/w`, "lock", writing.revision],
      ];
      for (const [name, kind, token] of cases) {
        expect(log.events("lock", named(name)), name).toEqual(OK);
        expect(log.events("release", named(name)), name).toEqual(OK);
        expect(acquired(name)).toEqual([
          { kind, name, token, tryOnly: false, lease: session.leaseId, outcome: "acquired", result: undefined },
        ]);
        expect(released(name)).toEqual([
          { kind, name, token, outcome: "released", heldMs: expect.any(Number), result: undefined },
        ]);
      }
      expect(acquired(`${base}/rw`).map((m) => [m.kind, m.token])).toEqual([
        ["read", reader.revision],
        ["write", writer.revision],
      ]);
      // The ticket's lock, then its resumption: same name, same token.
      expect(acquired(`${base}/t`).map((m) => [m.kind, m.token])).toEqual([
        ["lock", ticketed.revision],
        ["lock", ticketed.revision],
      ]);
      // Each gateway call is one traced request with its path, endpoint and attempt count.
      const requests = log.seen.filter((s) => s.event === "request:asyncEnd").map((s) => s.message);
      expect(requests.length).toBeGreaterThan(10);
      expect(requests).toContainEqual({
        path: "/v3/kv/txn",
        background: false,
        endpoint: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
        attempt: 1,
        status: 200,
        outcome: "ok",
        result: undefined,
      });
    } finally {
      await session.close();
    }
  });

  it("a failed try is an error event with its code; a waiter tells its position; a loss is published", async () => {
    log = logChannels();
    const etcd = client();
    const name = uniqueName("channels");
    const [first, second] = [await etcd.session({ ttl: 20 }), await etcd.session({ ttl: 20, keepAlive: "manual" })];
    try {
      const held = await first.mutex(name).lock();
      expect(await second.mutex(name).tryLock()).toBeUndefined();
      expect(log.events("lock", named(name))).toEqual([...OK, ...FAILED]);
      expect(log.seen.find((s) => s.event === "lock:error")?.message).toMatchObject({
        outcome: "LOCKED",
        error: { code: "LOCKED" },
      });
      const waiting = second.mutex(name).lock({ timeout: 10_000 });
      await until("the waiter watches the holder's key", 5_000, () =>
        log!.seen.some((s) => s.event === "request:asyncEnd" && s.message.path === "/v3/watch"),
      );
      await held.unlock();
      const next = await waiting;
      expect(log.seen.filter((s) => s.event === "lock:asyncEnd").at(-1)?.message).toMatchObject({
        waited: true,
        position: 1,
        token: next.revision,
      });
      // Revoked from outside: the next renewal finds the lease gone, and the session and its lock are lost.
      await client().lease.revoke(second.leaseId);
      await expect(second.renew()).rejects.toMatchObject({ code: "SESSION_EXPIRED" });
      expect(log.seen.filter((s) => !s.event.includes(":")).map((s) => [s.event, s.message])).toEqual([
        ["lock.released", { kind: "lock", name, token: held.revision, heldMs: expect.any(Number) }],
        ["session.lost", { leaseId: second.leaseId, code: "SESSION_EXPIRED" }],
        ["lock.lost", { kind: "lock", name, token: next.revision, heldMs: expect.any(Number) }],
      ]);
    } finally {
      await Promise.all([first.close(), second.close()].map((closing) => closing.catch(() => {})));
    }
  });
});

describe("etcd-edge/otel on real etcd", () => {
  it("withLock: mutex.with_lock around mutex.acquire, the caller's span and mutex.release; gateway spans", async () => {
    const otel = instrumented();
    const tracer = otel.tracerProvider.getTracer("test");
    const etcd = client();
    const name = uniqueName("otel");
    const { port } = new URL(sharedEndpoint());
    await tracer.startActiveSpan("caller", async (caller) => {
      try {
        await etcd.withLock(name, () =>
          tracer.startActiveSpan("work", (work) => etcd.put(`${name}-data`, "v").finally(() => work.end())),
        );
      } finally {
        caller.end();
      }
    });
    expect(otel.children(otel.span("caller"))).toEqual(["mutex.with_lock"]);
    const frame = otel.span("mutex.with_lock");
    // The client's shared lease is granted on its first use, inside the first withLock.
    expect(otel.children(frame).filter(logical)).toEqual(["mutex.acquire", "work", "mutex.release"]);
    expect(frame.kind).toBe(SpanKind.INTERNAL);
    expect(frame.attributes).toEqual({
      "etcd_edge.lock.kind": "mutex",
      "etcd_edge.lock.name": name,
      "etcd_edge.lock.outcome": "ok",
    });
    expect(frame.instrumentationScope).toEqual({ name: "etcd-edge", version: VERSION, schemaUrl: SCHEMA_URL });

    const acquire = otel.span("mutex.acquire");
    expect(acquire.attributes).toEqual({
      "etcd_edge.lock.kind": "mutex",
      "etcd_edge.lock.name": name,
      "etcd_edge.lock.outcome": "acquired",
      "etcd_edge.lock.token": expect.any(Number),
      "etcd_edge.lock.waited": false,
      "etcd_edge.lease.id": expect.stringMatching(/^\d+$/),
    });
    expect(otel.children(acquire).length).toBeGreaterThan(0);
    expect(otel.children(acquire).every((child) => /^(LeaseGrant|Txn) 127\.0\.0\.1:\d+$/.test(child))).toBe(true);
    expect(otel.children(otel.span("work"))).toEqual([`Put 127.0.0.1:${port}`]);
    const release = otel.span("mutex.release");
    expect(release.attributes).toMatchObject({
      "etcd_edge.lock.token": acquire.attributes["etcd_edge.lock.token"],
      "etcd_edge.lock.outcome": "released",
    });
    expect(otel.children(release)).toEqual([`Txn 127.0.0.1:${port}`]);
    const put = otel.span(`Put 127.0.0.1:${port}`);
    expect(put.kind).toBe(SpanKind.CLIENT);
    expect(put.attributes).toEqual({
      "db.system.name": "etcd",
      "db.operation.name": "Put",
      "http.request.method": "POST",
      "server.address": "127.0.0.1",
      "server.port": Number(port),
      "url.full": `http://127.0.0.1:${port}/v3/kv/put`,
      "http.response.status_code": 200,
    });
    expect(put.status.code).toBe(SpanStatusCode.UNSET);
    for (const span of otel.spans().filter((span) => span.kind === SpanKind.CLIENT)) expectGatewaySpan(span);

    const mutex = { "etcd_edge.lock.kind": "mutex" };
    expect(await otel.points("etcd_edge.lock.wait.duration")).toEqual([
      { attributes: { ...mutex, "etcd_edge.lock.outcome": "acquired" }, value: 1 },
    ]);
    expect(await otel.points("etcd_edge.lock.hold.duration")).toEqual([
      { attributes: { ...mutex, "etcd_edge.lock.outcome": "released" }, value: 1 },
    ]);
    // Up and down again: nothing waits and nothing is held once withLock has returned.
    expect(await otel.points("etcd_edge.lock.count")).toEqual([
      { attributes: { ...mutex, "etcd_edge.lock.state": "waiting" }, value: 0 },
      { attributes: { ...mutex, "etcd_edge.lock.state": "held" }, value: 0 },
    ]);
    expect(await otel.points("db.client.operation.duration")).toContainEqual({
      attributes: {
        "db.system.name": "etcd",
        "db.operation.name": "Put",
        "server.address": "127.0.0.1",
        "server.port": Number(port),
      },
      value: 1,
    });

    // Disabled: nothing more is recorded.
    handle!.disable();
    const before = otel.spans().length;
    await etcd.withLock(name, () => {});
    expect(otel.spans().length).toBe(before);
  });

  it("every recipe is named by its operation alone, its name an attribute; a template names it", async () => {
    const otel = memoryTelemetry();
    telemetry = otel;
    handle = instrument({ ...otel, lockTemplates: ["otel-orders/{run}/{id}"] });
    const etcd = client();
    const base = uniqueName("otel-recipes");
    const session = await etcd.session({ ttl: 20 });
    try {
      await (await session.mutex(`${base}/m`).lock()).unlock();
      await (await session.mutex(`${base}/m`).tryLock())!.unlock();
      const election = session.election(`${base}/e`);
      await election.campaign("me");
      await election.resign();
      await etcd.withSemaphore(`${base}/s`, 2, () => {});
      await (await session.semaphore(`${base}/s`, { permits: 2 }).tryAcquire())!.release();
      await (await session.rwlock(`${base}/rw`).readLock()).unlock();
      await (await session.rwlock(`${base}/rw`).writeLock()).unlock();
      await (await session.lockAll([`${base}/a`, `${base}/b`])).unlock();
      await etcd.withLocks([`${base}/a`, `${base}/b`], () => {});
    } finally {
      await session.close();
    }
    const names = new Set(
      otel
        .spans()
        .filter((span) => span.kind === SpanKind.INTERNAL)
        .map((span) => span.name),
    );
    expect([...names].sort()).toEqual([
      "election.campaign",
      "election.resign",
      "lock_all.acquire",
      "lock_all.release",
      "lock_all.with_lock",
      "mutex.acquire",
      "mutex.release",
      "mutex.try_acquire",
      "rwlock.acquire",
      "rwlock.release",
      "semaphore.acquire",
      "semaphore.release",
      "semaphore.try_acquire",
      "semaphore.with_lock",
    ]);
    const rw = otel.spans().filter((span) => span.name === "rwlock.acquire");
    expect(rw.map((span) => span.attributes["etcd_edge.lock.mode"])).toEqual(["read", "write"]);
    expect(otel.spans().filter((span) => span.name.includes(base))).toEqual([]);
    expect(otel.spans().filter((span) => span.status.code === SpanStatusCode.ERROR)).toEqual([]);

    const order = `${uniqueName("otel-orders")}/42`;
    await etcd.withLock(order, () => {});
    const acquire = otel.span("mutex.acquire otel-orders/{run}/{id}");
    expect(acquire.attributes).toMatchObject({
      "etcd_edge.lock.name": order,
      "etcd_edge.lock.template": "otel-orders/{run}/{id}",
    });
    expect(otel.spans().map((span) => span.name)).toContain("mutex.with_lock otel-orders/{run}/{id}");
    // Nothing user-keyed in a metric: no lock name, no template, no lease, no token.
    for (const attributes of await otel.metricAttributes()) {
      expect(Object.keys(attributes).filter((key) => /lock\.name|template|lease|token/.test(key))).toEqual([]);
    }
  });

  it("a busy try is no error; a timeout, a loss and a refusal are; the caller's abort is not", async () => {
    const otel = instrumented();
    const etcd = client();
    const name = uniqueName("otel");
    const [first, second] = [await etcd.session({ ttl: 20 }), await etcd.session({ ttl: 20, keepAlive: "manual" })];
    try {
      const held = await first.mutex(name).lock();
      expect(await second.mutex(name).tryLock()).toBeUndefined();
      expect(await second.semaphore(`${name}-s`, { permits: 1 }).tryAcquire()).toBeDefined();
      expect(await first.semaphore(`${name}-s`, { permits: 1 }).tryAcquire()).toBeUndefined();
      const tries = otel.spans().filter((span) => span.name.endsWith(".try_acquire"));
      expect(tries.map((span) => [span.name, span.attributes["etcd_edge.lock.outcome"], span.status.code])).toEqual([
        ["mutex.try_acquire", "busy", SpanStatusCode.UNSET],
        ["semaphore.try_acquire", "acquired", SpanStatusCode.UNSET],
        ["semaphore.try_acquire", "busy", SpanStatusCode.UNSET],
      ]);
      // The join's txn answered succeeded: false, which is no error either.
      expect(otel.spans().filter((span) => span.status.code === SpanStatusCode.ERROR)).toEqual([]);

      await expect(second.mutex(name).lock({ timeout: 300 })).rejects.toMatchObject({ code: "TIMEOUT" });
      const timedOut = otel
        .spans()
        .filter((span) => span.name === "mutex.acquire")
        .at(-1)!;
      expect(timedOut.status.code).toBe(SpanStatusCode.ERROR);
      // One vocabulary: the span's outcome is the metrics' (`timeout`, `lost`), its error.type the code; the on-call
      // engineer reads the message in its status and an exception event.
      expect(timedOut.attributes).toMatchObject({ "etcd_edge.lock.outcome": "timeout", "error.type": "TIMEOUT" });
      expect(timedOut.status.message).toMatch(/timed out after 300 ms/);
      expect(timedOut.events.map((event) => [event.name, event.attributes?.["exception.type"]])).toEqual([
        ["exception", "TIMEOUT"],
      ]);
      expect(timedOut.events[0]!.attributes?.["exception.message"]).toBe(timedOut.status.message);
      expect(await otel.points("etcd_edge.lock.wait.duration")).toContainEqual(
        expect.objectContaining({ attributes: expect.objectContaining({ "etcd_edge.lock.outcome": "timeout" }) }),
      );

      const stop = new AbortController();
      let before = watches(otel);
      const abandoned = second.mutex(name).lock({ signal: stop.signal });
      await until("the waiter watches", 5_000, () => watches(otel) > before);
      stop.abort();
      await expect(abandoned).rejects.toMatchObject({ code: "ABORTED" });
      await until("its span ends", 5_000, () => otel.spans().filter((s) => s.name === "mutex.acquire").length === 3);
      const aborted = otel
        .spans()
        .filter((span) => span.name === "mutex.acquire")
        .at(-1)!;
      expect([aborted.status.code, aborted.attributes["etcd_edge.lock.outcome"]]).toEqual([
        SpanStatusCode.UNSET,
        "aborted",
      ]);
      // Its watch, cut by the abort, is no error either.
      expect(
        otel
          .spans()
          .filter((span) => span.status.code === SpanStatusCode.ERROR)
          .map((span) => span.name),
      ).toEqual(["mutex.acquire"]);
      before = watches(otel);

      const waiting = second.mutex(name).lock({ timeout: 10_000 });
      await until("the waiter watches", 5_000, () => watches(otel) > before);
      expect(await otel.points("etcd_edge.lock.count")).toContainEqual({
        attributes: { "etcd_edge.lock.kind": "mutex", "etcd_edge.lock.state": "waiting" },
        value: 1,
      });
      await held.unlock();
      const next = await waiting;
      const waited = otel
        .spans()
        .filter((span) => span.name === "mutex.acquire")
        .at(-1)!;
      expect(waited.attributes).toMatchObject({
        "etcd_edge.lock.waited": true,
        "etcd_edge.lock.position": 1,
        "etcd_edge.lock.token": next.revision,
        "etcd_edge.lease.id": second.leaseId,
      });
      await client().lease.revoke(second.leaseId);
      await expect(second.renew()).rejects.toMatchObject({ code: "SESSION_EXPIRED" });
      // The caller's own renewal is a span (background renewals make none): etcd answered it with TTL 0.
      expect(otel.spans().filter((span) => span.name.startsWith("LeaseKeepAlive "))).toHaveLength(1);
      const mutex = { "etcd_edge.lock.kind": "mutex" };
      // Both of `second`'s holdings went with its lease: the lock and the permit.
      const losses = await otel.points("etcd_edge.lock.losses");
      expect(
        losses.sort((a, b) =>
          String(a.attributes["etcd_edge.lock.kind"]).localeCompare(String(b.attributes["etcd_edge.lock.kind"])),
        ),
      ).toEqual([
        { attributes: mutex, value: 1 },
        { attributes: { "etcd_edge.lock.kind": "semaphore" }, value: 1 },
      ]);
      expect(await otel.points("etcd_edge.lock.hold.duration")).toContainEqual({
        attributes: { ...mutex, "etcd_edge.lock.outcome": "lost" },
        value: 1,
      });
      expect(await otel.points("etcd_edge.session.losses")).toEqual([
        { attributes: { "etcd_edge.session.code": "SESSION_EXPIRED" }, value: 1 },
      ]);
      // Nothing waits, nothing is held: every up has had its down.
      expect((await otel.points("etcd_edge.lock.count")).map((point) => point.value)).toEqual([0, 0, 0, 0]);
    } finally {
      await Promise.all([first.close(), second.close()].map((closing) => closing.catch(() => {})));
    }
  });

  it("gateway failures: etcd's refusal with its gRPC code and HTTP status; a retry's resend count", async () => {
    const otel = instrumented();
    const { port } = new URL(sharedEndpoint());
    const etcd = client({ endpoints: [await closedPortUrl(), sharedEndpoint()] });
    await etcd.get(uniqueName("otel-retry"));
    const range = otel.span(`Range 127.0.0.1:${port}`);
    expect(range.attributes).toMatchObject({ "http.request.resend_count": 1, "http.response.status_code": 200 });
    expect(range.status.code).toBe(SpanStatusCode.UNSET);

    await expect(etcd.lease.revoke("123456789")).rejects.toMatchObject({ code: "LEASE_NOT_FOUND" });
    const revoke = otel.span(`LeaseRevoke 127.0.0.1:${port}`);
    expect(revoke.status.code).toBe(SpanStatusCode.ERROR);
    expect(revoke.attributes).toMatchObject({
      "error.type": "LEASE_NOT_FOUND",
      "db.response.status_code": "NOT_FOUND",
      "http.response.status_code": 404,
    });
    expect(await otel.points("db.client.operation.duration")).toContainEqual({
      attributes: {
        "db.system.name": "etcd",
        "db.operation.name": "LeaseRevoke",
        "server.address": "127.0.0.1",
        "server.port": Number(port),
        "db.response.status_code": "NOT_FOUND",
        "error.type": "LEASE_NOT_FOUND",
      },
      value: 1,
    });
  });

  it("background renewals make no spans, and still count in db.client.operation.duration", async () => {
    const otel = instrumented();
    const etcd = client();
    const session = await etcd.session({ ttl: 3 });
    try {
      await until("a background renewal", 5_000, async () =>
        (await otel.points("db.client.operation.duration")).some(
          (p) => p.attributes["db.operation.name"] === "LeaseKeepAlive",
        ),
      );
      expect(otel.spans().map((span) => span.name)).toEqual([expect.stringMatching(/^LeaseGrant /)]);
      await session.renew();
      expect(otel.spans().filter((span) => span.name.startsWith("LeaseKeepAlive "))).toHaveLength(1);
    } finally {
      await session.close();
    }
  });
});

/** A span the SDK's callers see: not a gateway call's. */
const logical = (name: string) => !/^[A-Z]\w* 127\.0\.0\.1:\d+$/.test(name);

/** Watch streams opened so far (a stream's span ends when it opens). */
const watches = (otel: MemoryTelemetry) => otel.spans().filter((span) => span.name.startsWith("Watch ")).length;

/** Every gateway span carries the database and HTTP client attributes, and no credentials in its URL. */
function expectGatewaySpan(span: ReadableSpan): void {
  expect(span.name).toMatch(/^[A-Z]\w+ 127\.0\.0\.1:\d+$/);
  expect(span.attributes).toMatchObject({
    "db.system.name": "etcd",
    "db.operation.name": span.name.split(" ")[0],
    "http.request.method": "POST",
    "server.address": "127.0.0.1",
    "server.port": expect.any(Number),
    "url.full": expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/v3\//),
    "http.response.status_code": expect.any(Number),
  });
}

describe("no secret in a channel message, a span or a metric (auth enabled)", () => {
  const rootPassword = "root-pw-0d1f";
  const password = "app-pw-7c4e9b2a";
  let member: EtcdMember;

  beforeAll(async () => {
    member = await startEtcd();
    await enableAuth(member, { rootPassword });
    await addUser(member, { rootPassword, user: "app", password });
  });
  afterAll(async () => {
    await member?.stop();
  });

  it("with a password, its auth token, a ticket's secret and a value in play", async () => {
    log = logChannels();
    const otel = instrumented();
    const tokens = new Set<string>();
    const fetch: Fetch = (input, init) => {
      const token = init.headers?.authorization;
      if (token) tokens.add(token);
      return globalThis.fetch(input, init);
    };
    const etcd = client({ endpoints: member.clientUrl, auth: { username: "app", password }, fetch });
    const name = uniqueName("secrets");
    const value = `value-${crypto.randomUUID()}`;
    await etcd.withLock(name, () => etcd.put(`${name}-data`, value));
    expect(await etcd.get(`${name}-data`)).toMatchObject({ value });
    const session = await etcd.session({ ttl: 20 });
    const lock = await session.mutex(name).lock();
    const ticket = lock.ticket();
    const resumed = await etcd.resumeLock(ticket);
    await expect(lock.unlock()).rejects.toMatchObject({ code: "LOCK_LOST" });
    await resumed.unlock();
    await Promise.all([session.close(), resumed.session.close()]);
    // Refused: a wrong password's failure is published too, and must not carry it either.
    const wrong = `wrong-pw-${crypto.randomUUID()}`;
    await expect(
      client({ endpoints: member.clientUrl, auth: { username: "app", password: wrong } }).get("k"),
    ).rejects.toMatchObject({ code: "UNAUTHENTICATED" });

    expect(tokens.size).toBeGreaterThan(0);
    const secrets = [password, wrong, rootPassword, ticket.secret, value, ...tokens];
    const published = [
      ...log.seen.map((s) => s.text),
      ...otel.spans().map((span) => spell([span.name, span.attributes, span.status, span.events])),
      ...(await otel.metricAttributes()).map((attributes) => spell(attributes)),
    ];
    // Not vacuous: the channels and spans saw this test's calls, errors included, with their messages and events.
    expect(log.seen.some((s) => s.event === "request:error")).toBe(true);
    const failed = otel.spans().filter((span) => span.status.code === SpanStatusCode.ERROR);
    expect(failed.map((span) => span.attributes["error.type"])).toEqual(
      expect.arrayContaining(["LOCK_LOST", "UNAUTHENTICATED"]),
    );
    for (const span of failed) {
      expect(span.status.message).toBeTruthy();
      expect(span.events.some((event) => event.name === "exception")).toBe(true);
    }
    expect(published.some((text) => text.includes(name))).toBe(true);
    for (const secret of secrets) {
      expect(secret.length).toBeGreaterThan(8);
      expect(published.filter((text) => text.includes(secret))).toEqual([]);
    }
  });
});
