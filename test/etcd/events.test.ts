// onEvent on a real member: the sequences a handler sees for a contended lock, a request that fails over
// from a refused port to the member, and a session whose lease is revoked from outside.
import { describe, expect, it } from "vitest";
import type { EtcdEvent } from "../../src/index.js";
import { until } from "../support/async.js";
import { eventShapes } from "../support/events.js";
import { freePort } from "../support/ports.js";
import { client, sharedEndpoint, uniqueName } from "../support/etcd.js";

describe("onEvent on real etcd", () => {
  it("a contended lock: acquired, the waiter's place, released, the waiter acquired after the release", async () => {
    const events: EtcdEvent[] = [];
    const etcd = client({ onEvent: (event) => void events.push(event) });
    const name = uniqueName("events");
    const [first, second] = [await etcd.session({ ttl: 20 }), await etcd.session({ ttl: 20 })];
    try {
      const held = await first.mutex(name).lock();
      const waiting = second.mutex(name).lock({ timeout: 10_000 });
      await until("the waiter is told it waits", 5_000, () => events.some((event) => event.type === "lock.waiting"));
      await held.unlock();
      const next = await waiting;
      const told = eventShapes(events, ["lock.waiting", "lock.acquired", "lock.released"]);
      expect(told.slice(0, 2)).toEqual([
        { type: "lock.acquired", kind: "lock", name, revision: held.revision },
        { type: "lock.waiting", kind: "lock", name, position: 1 },
      ]);
      // The waiter hears the delete on its watch, possibly before the holder reads its unlock's answer: the
      // last two come in either order.
      expect(told.slice(2)).toEqual(
        expect.arrayContaining([
          { type: "lock.released", kind: "lock", name, revision: held.revision },
          { type: "lock.acquired", kind: "lock", name, revision: next.revision },
        ]),
      );
      expect(told).toHaveLength(4);
      expect(next.revision).toBeGreaterThan(held.revision);
      const waited = events.filter((event) => event.type === "lock.acquired").at(-1);
      expect(waited?.type === "lock.acquired" && waited.waitedMs > 0).toBe(true);
      // Every request the member answered was told, with its status.
      const requests = events.filter((event) => event.type === "request");
      expect(requests.length).toBeGreaterThanOrEqual(6);
      expect(
        requests.every(
          (event) => event.type === "request" && event.status === 200 && event.endpoint === sharedEndpoint(),
        ),
      ).toBe(true);
      await next.unlock();
    } finally {
      await Promise.all([first.close(), second.close()]);
    }
  });

  it("a request that fails over: refused on a closed port, then answered by the member", async () => {
    const events: EtcdEvent[] = [];
    const refused = `http://127.0.0.1:${await freePort()}`;
    const etcd = client({ endpoints: [refused, sharedEndpoint()], onEvent: (event) => void events.push(event) });
    const key = uniqueName("events");
    await etcd.put(key, "v");
    expect(eventShapes(events, ["request", "failover"])).toEqual([
      { type: "request", path: "/v3/kv/put", endpoint: refused, status: undefined, code: "UNAVAILABLE", attempt: 1 },
      { type: "failover", from: refused, to: sharedEndpoint(), code: "UNAVAILABLE" },
      { type: "request", path: "/v3/kv/put", endpoint: sharedEndpoint(), status: 200, code: undefined, attempt: 2 },
    ]);
    expect((await etcd.get(key))?.value).toBe("v");
  });

  it(
    "a session whose lease is revoked from outside: " + "its renewal finds it gone, the session and its lock are lost",
    async () => {
      const events: EtcdEvent[] = [];
      const etcd = client({ onEvent: (event) => void events.push(event) });
      const session = await etcd.session({ ttl: 20, keepAlive: "manual" });
      const lock = await session.mutex(uniqueName("events")).lock();
      await session.renew();
      await client().lease.revoke(session.leaseId);
      await expect(session.renew()).rejects.toMatchObject({ code: "SESSION_EXPIRED" });
      expect(eventShapes(events, ["session.renewed", "session.lost", "lock.lost"])).toEqual([
        { type: "session.renewed", leaseId: session.leaseId, ttl: 20 },
        { type: "session.lost", leaseId: session.leaseId, code: "SESSION_EXPIRED" },
        { type: "lock.lost", kind: "lock", name: lock.name, revision: lock.revision },
      ]);
      expect(lock.held).toBe(false);
      expect(lock.signal.aborted).toBe(true);
    },
  );
});
