// onEvent: what a handler is told, in order, for a contended lock, a failed-over request and a lost session;
// a throwing handler breaks nothing; with no handler nothing is built.
import { describe, expect, it } from "vitest";
import { Etcd, type EtcdEvent } from "../../src/index.js";
import { sleep } from "../support/async.js";
import { eventShapes } from "../support/events.js";
import { A, B, json, jsonText, route, useGateway } from "../support/gateway.js";
import { mockClient } from "../support/mock.js";
import { header, kv, unaryErrorBody } from "../support/wire.js";

const server = useGateway();

describe("onEvent", () => {
  it("a contended lock: waiting with its place, acquired, released, then the next holder acquired", async () => {
    const events: EtcdEvent[] = [];
    const { etcd } = mockClient({ onEvent: (event) => void events.push(event) });
    const [first, second] = [await etcd.session({ ttl: 30 }), await etcd.session({ ttl: 30 })];
    const held = await first.mutex("jobs").lock();
    const asked = performance.now();
    const waiting = second.mutex("jobs").lock({ timeout: 5_000 });
    await sleep(50);
    await held.unlock();
    const next = await waiting;
    const waited = performance.now() - asked;
    const shapes = eventShapes(events, ["lock.waiting", "lock.acquired", "lock.released"]);
    expect(shapes.slice(0, 2)).toEqual([
      { type: "lock.acquired", kind: "lock", name: "jobs", revision: held.revision },
      { type: "lock.waiting", kind: "lock", name: "jobs", position: 1 },
    ]);
    // The holder's answer and the waiter's delete event travel apart: either may arrive first.
    expect(shapes.slice(2)).toHaveLength(2);
    expect(shapes.slice(2)).toEqual(
      expect.arrayContaining([
        { type: "lock.released", kind: "lock", name: "jobs", revision: held.revision },
        { type: "lock.acquired", kind: "lock", name: "jobs", revision: next.revision },
      ]),
    );
    const acquired = events.filter((event) => event.type === "lock.acquired");
    expect(acquired.every((event) => event.type === "lock.acquired" && event.waitedMs >= 0)).toBe(true);
    // The waiter's: from its call to its holding, within what the test saw of that wait.
    const theWaiters = acquired.find((event) => event.type === "lock.acquired" && event.revision === next.revision);
    expect(theWaiters?.type === "lock.acquired" && theWaiters.waitedMs >= 50 && theWaiters.waitedMs <= waited).toBe(
      true,
    );
    // Every request was told, each a success.
    const requests = events.filter((event) => event.type === "request");
    expect(requests.length).toBeGreaterThanOrEqual(6);
    expect(requests.every((event) => event.type === "request" && event.status === 200 && event.attempt === 1)).toBe(
      true,
    );
  });

  it("a failed-over request: the failed attempt, the failover, the retry, the answered attempt", async () => {
    route(server, "/v3/kv/range", () => jsonText(unaryErrorBody("3.5", 14, "etcdserver: no leader"), 503), A);
    route(
      server,
      "/v3/kv/range",
      () => json({ header: header(5), kvs: [kv({ key: "k", value: "v", create: 5, mod: 5, version: 1 })], count: "1" }),
      B,
    );
    const events: EtcdEvent[] = [];
    const etcd = new Etcd({ endpoints: [A, B], onEvent: (event) => void events.push(event) });
    expect((await etcd.get("k"))?.value).toBe("v");
    expect(eventShapes(events, ["request", "failover", "retry"])).toEqual([
      { type: "request", path: "/v3/kv/range", endpoint: A, status: 503, code: "UNAVAILABLE", attempt: 1 },
      { type: "failover", from: A, to: B, code: "UNAVAILABLE" },
      { type: "retry", path: "/v3/kv/range", endpoint: B, attempt: 1, code: "UNAVAILABLE" },
      { type: "request", path: "/v3/kv/range", endpoint: B, status: 200, code: undefined, attempt: 2 },
    ]);
  });

  it("a lost session: its renewal finds the lease gone, the session and the lock it held are lost", async () => {
    const events: EtcdEvent[] = [];
    const { etcd, mock } = mockClient({ onEvent: (event) => void events.push(event) });
    const session = await etcd.session({ ttl: 5, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    await session.renew();
    mock.advance(10_000);
    await expect(session.renew()).rejects.toMatchObject({ code: "SESSION_EXPIRED" });
    expect(eventShapes(events, ["session.renewed", "session.lost", "lock.lost"])).toEqual([
      { type: "session.renewed", leaseId: session.leaseId, ttl: 5 },
      { type: "session.lost", leaseId: session.leaseId, code: "SESSION_EXPIRED" },
      { type: "lock.lost", kind: "lock", name: "jobs", revision: lock.revision },
    ]);
    expect(lock.held).toBe(false);
  });

  it("a handler that throws (or rejects) never breaks the call", async () => {
    let calls = 0;
    const { etcd } = mockClient({
      onEvent: (event) => {
        calls++;
        if (event.type === "request") throw new Error("handler bug");
        return Promise.reject(new Error("async handler bug")) as never;
      },
    });
    await etcd.put("k", "v");
    await etcd.withLock("jobs", () => "done");
    expect(calls).toBeGreaterThan(3);
  });

  it("onEvent must be a function", () => {
    expect(() => new Etcd({ endpoints: A, onEvent: "log" as never })).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT" }),
    );
  });
});
