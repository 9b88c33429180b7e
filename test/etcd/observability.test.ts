// diagnostics channels and etcd-edge/otel against a real member: what a raw subscriber sees for every recipe,
// the spans etcd-edge/otel makes and how they nest under the caller's span, its metrics, and, on a member with
// auth enabled, that no password, auth token, ticket secret or value reaches a channel message, a span or a
// metric.
import type { ReadableSpan } from "@opentelemetry/sdk-trace";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Fetch, op } from "../../src/index.js";
import { instrument, type Instrumentation } from "../../src/otel/index.js";
import { until } from "../support/async.js";
import { type ChannelLog, logChannels, spell } from "../support/channels.js";
import { client, uniqueName } from "../support/etcd.js";
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
        expect(acquired(name)).toEqual([{ kind, name, token, outcome: "acquired", result: undefined }]);
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
        endpoint: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
        attempt: 1,
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
        ["session.lost", { leaseId: second.leaseId, code: "SESSION_EXPIRED" }],
        ["lock.lost", { kind: "lock", name, token: next.revision, heldMs: expect.any(Number) }],
      ]);
    } finally {
      await Promise.all([first.close(), second.close()].map((closing) => closing.catch(() => {})));
    }
  });
});

describe("etcd-edge/otel on real etcd", () => {
  it("withLock: a span around the lock's span, the work and the release; requests nest under them", async () => {
    const otel = instrumented();
    const tracer = otel.tracerProvider.getTracer("test");
    const etcd = client();
    const name = uniqueName("otel");
    await tracer.startActiveSpan("caller", async (caller) => {
      try {
        await etcd.withLock(name, () =>
          tracer.startActiveSpan("work", async (work) => {
            await etcd.put(`${name}-data`, "v");
            work.end();
          }),
        );
      } finally {
        caller.end();
      }
    });
    expect(otel.children(otel.span("caller"))).toEqual([`withLock ${name}`]);
    const frame = otel.span(`withLock ${name}`);
    // The client's shared lease is granted on its first use, inside the first withLock.
    expect(otel.children(frame).filter((child) => !child.startsWith("etcd "))).toEqual([
      `lock ${name}`,
      "work",
      `release ${name}`,
    ]);
    expect(frame.attributes).toMatchObject({ "etcd_edge.lock.kind": "lock", "etcd_edge.lock.outcome": "ok" });

    const lock = otel.span(`lock ${name}`);
    const token = lock.attributes["etcd_edge.lock.token"];
    expect(lock.attributes).toEqual({
      "etcd_edge.lock.kind": "lock",
      "etcd_edge.lock.name": name,
      "etcd_edge.lock.outcome": "acquired",
      "etcd_edge.lock.token": expect.any(Number),
      "etcd_edge.lock.waited": false,
    });
    const lockRequests = otel.children(lock);
    expect(lockRequests.length).toBeGreaterThan(0);
    expect(lockRequests.every((child) => child.startsWith("etcd /v3/"))).toBe(true);
    expect(otel.children(otel.span("work"))).toEqual(["etcd /v3/kv/put"]);
    const release = otel.span(`release ${name}`);
    expect(release.attributes).toMatchObject({ "etcd_edge.lock.token": token, "etcd_edge.lock.outcome": "released" });
    expect(otel.children(release)).toEqual(["etcd /v3/kv/txn"]);
    const put = requestSpan(otel.spans(), "etcd /v3/kv/put");
    expect(put.attributes).toMatchObject({
      "etcd_edge.request.path": "/v3/kv/put",
      "etcd_edge.request.outcome": "ok",
      "etcd_edge.request.attempts": 1,
      "server.address": "127.0.0.1",
      "server.port": expect.any(Number),
    });

    const acquired = { "etcd_edge.lock.kind": "lock", "etcd_edge.lock.outcome": "acquired" };
    expect(await otel.points("etcd_edge.lock.wait.duration")).toEqual([{ attributes: acquired, value: 1 }]);
    expect(await otel.points("etcd_edge.lock.acquisitions")).toEqual([{ attributes: acquired, value: 1 }]);
    expect(await otel.points("etcd_edge.lock.hold.duration")).toEqual([
      { attributes: { "etcd_edge.lock.kind": "lock", "etcd_edge.lock.outcome": "released" }, value: 1 },
    ]);
    expect(await otel.points("etcd_edge.request.duration")).toContainEqual({
      attributes: { "etcd_edge.request.path": "/v3/kv/put", "etcd_edge.request.outcome": "ok" },
      value: 1,
    });

    // Disabled: nothing more is recorded.
    handle!.disable();
    const before = otel.spans().length;
    await etcd.withLock(name, () => {});
    expect(otel.spans().length).toBe(before);
  });

  it("a release handed to waitUntil: the withLock span's child, ending after it", async () => {
    const otel = instrumented();
    const etcd = client();
    const name = uniqueName("otel-handoff");
    const handed: Promise<unknown>[] = [];
    await etcd.withLock(name, () => {}, { waitUntil: (release) => handed.push(release) });
    expect(handed).toHaveLength(1);
    await handed[0];
    const frame = otel.span(`withLock ${name}`);
    expect(otel.children(frame).filter((child) => !child.startsWith("etcd "))).toEqual([
      `lock ${name}`,
      `release ${name}`,
    ]);
    const release = otel.span(`release ${name}`);
    expect(release.attributes).toMatchObject({ "etcd_edge.lock.outcome": "released" });
    expect(otel.children(release)).toEqual(["etcd /v3/kv/txn"]);
    // The caller had its answer before the release landed: the frame ends first, and its child after it.
    const nanos = ([seconds, ns]: readonly [number, number]) => BigInt(seconds) * 1_000_000_000n + BigInt(ns);
    expect(nanos(release.endTime) >= nanos(frame.endTime)).toBe(true);
  });

  it("a refused try, a wait and a loss: error status, position, the lost-lock counter", async () => {
    const otel = instrumented();
    const etcd = client();
    const name = uniqueName("otel");
    const [first, second] = [await etcd.session({ ttl: 20 }), await etcd.session({ ttl: 20, keepAlive: "manual" })];
    try {
      const held = await first.mutex(name).lock();
      expect(await second.mutex(name).tryLock()).toBeUndefined();
      const refused = otel.spans().filter((span) => span.name === `lock ${name}`)[1]!;
      expect(refused.attributes).toMatchObject({ "etcd_edge.lock.outcome": "LOCKED", "error.type": "LOCKED" });
      expect(refused.status.code).toBe(2); // SpanStatusCode.ERROR
      const waiting = second.mutex(name).lock({ timeout: 10_000 });
      await until("the waiter is waiting", 5_000, async () =>
        (await otel.points("etcd_edge.request.duration")).some(
          (p) => p.attributes["etcd_edge.request.path"] === "/v3/watch",
        ),
      );
      await held.unlock();
      const next = await waiting;
      const waited = otel.spans().filter((span) => span.name === `lock ${name}`)[2]!;
      expect(waited.attributes).toMatchObject({
        "etcd_edge.lock.waited": true,
        "etcd_edge.lock.position": 1,
        "etcd_edge.lock.token": next.revision,
      });
      await client().lease.revoke(second.leaseId);
      await expect(second.renew()).rejects.toMatchObject({ code: "SESSION_EXPIRED" });
      expect(await otel.points("etcd_edge.lock.lost")).toEqual([
        { attributes: { "etcd_edge.lock.kind": "lock" }, value: 1 },
      ]);
      expect(await otel.points("etcd_edge.lock.hold.duration")).toContainEqual({
        attributes: { "etcd_edge.lock.kind": "lock", "etcd_edge.lock.outcome": "lost" },
        value: 1,
      });
      expect(await otel.points("etcd_edge.session.lost")).toEqual([
        { attributes: { "etcd_edge.session.code": "SESSION_EXPIRED" }, value: 1 },
      ]);
    } finally {
      await Promise.all([first.close(), second.close()].map((closing) => closing.catch(() => {})));
    }
  });
});

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
    // Not vacuous: the channels and spans saw this test's calls, errors included.
    expect(log.seen.some((s) => s.event === "request:error")).toBe(true);
    expect(published.some((text) => text.includes(name))).toBe(true);
    for (const secret of secrets) {
      expect(secret.length).toBeGreaterThan(8);
      expect(published.filter((text) => text.includes(secret))).toEqual([]);
    }
  });
});

function requestSpan(spans: ReadableSpan[], name: string): ReadableSpan {
  const found = spans.filter((span) => span.name === name);
  expect(found.length).toBeGreaterThan(0);
  return found.at(-1)!;
}
