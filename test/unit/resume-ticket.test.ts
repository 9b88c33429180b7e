// What `resumeLock` takes and what its takeover decides (src/lock/mutex/resume.ts), on the mock: a ticket that is
// not one is INVALID_ARGUMENT saying which part is wrong, before any request; the new lease's TTL is the one asked
// for, else the sender's; and a takeover whose transaction did not land for us is LOCK_LOST however close the key
// looks to ours: only the key on our lease, with our fresh secret, at the ticket's revision, is ours.
import { describe, expect, it } from "vitest";
import { type LockTicket, op } from "../../src/index.js";
import { createMockEtcd } from "../../src/testing/index.js";
import { rejection } from "../support/async.js";
import { mockClient, type Through } from "../support/mock.js";
import { answerLosingFetch } from "../support/outage.js";

/** A ticket of a lock held by a fresh session on a fresh mock, and a client of that mock (through `through`). */
async function ticketed(through?: Through) {
  const sender = mockClient();
  const lock = await (await sender.etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("job").lock();
  const resumer = mockClient({}, { mock: sender.mock, ...(through === undefined ? {} : { through }) });
  return { lock, ticket: lock.ticket(), sender: sender.etcd, resumer };
}

describe("a ticket that is not one", () => {
  it("is INVALID_ARGUMENT naming what is wrong, and nothing is sent", async () => {
    const { ticket, resumer } = await ticketed();
    const cases: Array<[string, unknown, string]> = [
      ["an empty secret", { ...ticket, secret: "" }, "a lock ticket must be { name, key, leaseId, revision, secret }"],
      ["no secret", { ...ticket, secret: undefined }, "a lock ticket must be"],
      ["revision 0", { ...ticket, revision: 0 }, "a lock ticket must be"],
      ["a key of another name", { ...ticket, key: `other/${ticket.key.split("/")[1]}` }, "a lock ticket must be"],
      ["a key not of a mutex's form", { ...ticket, key: "job/x7" }, "ticket.key job/x7 is not a key of lock job"],
      ["a reserved name", { ...ticket, name: "__etcd-edge/x", key: "__etcd-edge/x/7" }, "a lock name must not"],
      ["a bad lease ID", { ...ticket, leaseId: "x" }, "ticket.leaseId"],
    ];
    for (const [what, bad, says] of cases) {
      const sent = resumer.calls.length;
      const error = await rejection(resumer.etcd.resumeLock(bad as LockTicket));
      expect(error.code, what).toBe("INVALID_ARGUMENT");
      expect(error.message, what).toContain(says);
      expect(resumer.calls.length, what).toBe(sent);
    }
  });

  it("with a TTL out of range names where it came from: the option, else the ticket", async () => {
    const { ticket, resumer } = await ticketed();
    expect((await rejection(resumer.etcd.resumeLock(ticket, { ttl: 0 }))).message).toMatch(/^ttl must be/);
    expect((await rejection(resumer.etcd.resumeLock({ ...ticket, ttl: 0 }))).message).toMatch(/^ticket\.ttl must/);
    // The option wins over the ticket's own.
    const resumed = await resumer.etcd.resumeLock({ ...ticket, ttl: 0 }, { ttl: 7 });
    expect(resumed.session.ttl).toBe(7);
    await resumed.unlock();
  });
});

describe("a ticket and a lock's JSON", () => {
  it("the ticket carries the secret and the TTL; the JSON only what names the holding", async () => {
    const { lock, ticket } = await ticketed();
    expect(ticket).toEqual({ ...JSON.parse(JSON.stringify(lock)), secret: expect.any(String), ttl: 30 });
    expect(JSON.parse(JSON.stringify(lock))).toEqual({
      name: "job",
      key: lock.key,
      leaseId: lock.leaseId,
      revision: lock.revision,
    });
  });
});

describe("the new lease", () => {
  it("has the TTL asked for, else the sender's", async () => {
    const { ticket, resumer, lock } = await ticketed();
    const resumed = await resumer.etcd.resumeLock(ticket);
    expect(resumed.session.ttl).toBe(lock.session.ttl);
    const again = await resumer.etcd.resumeLock(resumed.ticket(), { ttl: 9 });
    expect(again.session.ttl).toBe(9);
    // A ticket from before tickets carried the TTL: 60 s.
    const old = await resumer.etcd.resumeLock({ ...again.ticket(), ttl: undefined });
    expect(old.session.ttl).toBe(60);
    await old.unlock();
  });
});

describe("a takeover", () => {
  it("given up before it starts takes nothing: ABORTED, and the sender still holds", async () => {
    const { ticket, lock, resumer } = await ticketed();
    const sent = resumer.calls.length;
    const error = await rejection(resumer.etcd.resumeLock(ticket, { signal: AbortSignal.abort() }));
    expect(error.code).toBe("ABORTED");
    expect(resumer.calls.length).toBe(sent);
    expect((await resumer.etcd.get(ticket.key))?.lease).toBe(lock.leaseId);
  });

  it("whose answer was lost is sent again, and the resumed lock's fenced writes land", async () => {
    const mock = createMockEtcd();
    const sender = mockClient({}, { mock });
    const lock = await (await sender.etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("job").lock();
    const losing = answerLosingFetch(
      (input, init) => mock.fetch(input, init as RequestInit) as never,
      (path, body) => path === "/v3/kv/txn" && body.includes("request_put"),
    );
    const resumer = mockClient({ fetch: losing }, { mock });
    const resumed = await resumer.etcd.resumeLock(lock.ticket());
    expect(losing.lost).toBe(1);
    const write = await resumer.etcd.txn().if(resumed.ifHeld()).then(op.put("job-data", "resumed")).commit();
    expect(write.succeeded).toBe(true);
    await resumed.unlock();
  });
});

describe("a takeover that did not land for us", () => {
  it("a ticket used already is LOCK_LOST: the first resumer still holds, and its key stays on its lease", async () => {
    const { ticket, resumer } = await ticketed();
    const first = await resumer.etcd.resumeLock(ticket);
    const error = await rejection(resumer.etcd.resumeLock(ticket));
    expect(error.code).toBe("LOCK_LOST");
    expect(error.message).toContain("no longer held by this ticket");
    expect(first.held).toBe(true);
    expect((await resumer.etcd.get(ticket.key))?.lease).toBe(first.leaseId);
    await first.unlock();
  });

  it("a ticket whose lock was released is LOCK_LOST", async () => {
    const { ticket, lock, resumer } = await ticketed();
    await lock.unlock();
    expect((await rejection(resumer.etcd.resumeLock(ticket))).code).toBe("LOCK_LOST");
  });

  /**
   * Changes the key just before the takeover's transaction reaches the mock, by `write(key, next, lease)`: `next`
   * is the fresh secret the transaction would write, `lease` the new lease it would move the key to.
   */
  function beforeTakeover(write: (key: string, next: string, lease: string) => Promise<unknown>): Through {
    return async (input, init, forward) => {
      const body = String(init.body ?? "");
      if (input.endsWith("/v3/kv/txn") && body.includes("request_put")) {
        const put = JSON.parse(body).success[0].request_put;
        await write(atob(put.key), atob(put.value), put.lease);
      }
      return forward(input, init);
    };
  }

  it("the key on our new lease with another value is not ours: LOCK_LOST", async () => {
    const { ticket, resumer, sender } = await ticketed(
      beforeTakeover((key, _next, lease) => sender.put(key, "someone else's", { lease })),
    );
    expect((await rejection(resumer.etcd.resumeLock(ticket))).code).toBe("LOCK_LOST");
  });

  it("the key with our fresh value on another lease is not ours: LOCK_LOST", async () => {
    const { ticket, resumer, sender, lock } = await ticketed(
      beforeTakeover((key, next) => sender.put(key, next, { lease: lock.leaseId })),
    );
    expect((await rejection(resumer.etcd.resumeLock(ticket))).code).toBe("LOCK_LOST");
  });
});
