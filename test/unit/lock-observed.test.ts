// What an observer sees of a mutex's lock and of a lock resumed from a ticket (src/lock/mutex): each is traced
// and told as a lock of its name, and an error whose gateway echoed the request (a proxy's debugging page, a
// WAF's refusal) carries neither the join's secret nor a takeover's: whoever logs the error could take the lock
// over with it. On the mock.
import { inspect } from "node:util";
import { describe, expect, it } from "vitest";
import type { EtcdEvent } from "../../src/index.js";
import { rejection } from "../support/async.js";
import { logChannels } from "../support/channels.js";
import { mockClient, type Through } from "../support/mock.js";

/** A lock's join or a takeover: the one transaction that puts a contender's key. */
const isPut = (input: string, body: string) => input.endsWith("/v3/kv/txn") && body.includes("request_put");

/**
 * Refuses every put of a key with an etcd-shaped answer (a final one: nothing is resent) whose message echoes
 * the request, and keeps what each one carried.
 */
function echoPuts(): { through: Through; bodies: string[] } {
  const bodies: string[] = [];
  const through: Through = async (input, init, forward) => {
    if (!isPut(input, init.body)) return forward(input, init);
    bodies.push(init.body);
    const message = `request refused by policy: ${init.body}`;
    return Response.json({ code: 3, error: message, message }, { status: 400 }) as never;
  };
  return { through, bodies };
}

/** The values a transaction's puts carried, base64 as sent and decoded. */
function putValues(body: string): string[] {
  const txn = JSON.parse(body) as { success: Array<{ request_put?: { value: string } }> };
  return txn.success.flatMap(({ request_put }) => (request_put ? [request_put.value, atob(request_put.value)] : []));
}

/** Everything an error shows: inspected deeply, printed, serialised. */
const shown = (error: unknown) =>
  [inspect(error, { showHidden: true, depth: Number.POSITIVE_INFINITY }), String(error), JSON.stringify(error)].join();

describe("a mutex's lock and a resumed lock, traced", () => {
  it("are each a lock of its name on the lock channel, with its token", async () => {
    const log = logChannels();
    try {
      const { etcd } = mockClient();
      const lock = await (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs").lock();
      const resumed = await etcd.resumeLock(lock.ticket());
      await resumed.unlock();
      const ends = log.seen.filter((s) => s.event === "lock:asyncEnd").map((s) => s.message);
      expect(ends).toEqual([
        expect.objectContaining({ kind: "lock", name: "jobs", outcome: "acquired", token: lock.revision }),
        expect.objectContaining({ kind: "lock", name: "jobs", outcome: "acquired", token: lock.revision }),
      ]);
    } finally {
      log.stop();
    }
  });

  it("a resumed lock is told as a lock of its name when it is taken and when it is released", async () => {
    const events: EtcdEvent[] = [];
    const { etcd } = mockClient({ onEvent: (event) => void events.push(event) });
    const lock = await (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs").lock();
    const from = events.length;
    await (await etcd.resumeLock(lock.ticket())).unlock();
    const told = events.slice(from).filter((e) => e.type === "lock.acquired" || e.type === "lock.released");
    expect(told).toEqual([
      expect.objectContaining({ type: "lock.acquired", kind: "lock", name: "jobs", revision: lock.revision }),
      expect.objectContaining({ type: "lock.released", kind: "lock", name: "jobs", revision: lock.revision }),
    ]);
  });
});

describe("an error whose gateway echoed the request", () => {
  it("of a lock's join shows not the secret it put", async () => {
    const { through, bodies } = echoPuts();
    const { etcd } = mockClient({}, { through });
    const error = await rejection((await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs").lock());
    expect(bodies.length).toBeGreaterThan(0);
    const text = shown(error);
    expect(text).toContain("[redacted]");
    for (const secret of bodies.flatMap(putValues)) expect(text).not.toContain(secret);
  });

  it("of a takeover shows neither the ticket's secret nor the one it put", async () => {
    const { through, bodies } = echoPuts();
    const sender = mockClient();
    const lock = await (await sender.etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs").lock();
    const ticket = lock.ticket();
    const { etcd } = mockClient({}, { mock: sender.mock, through });
    const error = await rejection(etcd.resumeLock(ticket));
    expect(bodies.length).toBeGreaterThan(0);
    const text = shown(error);
    expect(text).toContain("[redacted]");
    for (const secret of [ticket.secret, btoa(ticket.secret), ...bodies.flatMap(putValues)]) {
      expect(text).not.toContain(secret);
    }
  });
});
