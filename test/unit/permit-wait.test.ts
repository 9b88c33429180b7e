// What a semaphore's waiter sends while it waits (semaphore/admission.ts): watching, one stream of the line's
// deletes from just after its join, and no read while the deletes are in order; polling, no stream at all and
// reads that list at most `permits + 1` keys (whether fewer than `permits` are ahead is all a poll asks). On the
// mock, recording each request.
import { describe, expect, it } from "vitest";
import type { Etcd } from "../../src/index.js";
import { rejection, sleep, stillPending, until, within } from "../support/async.js";
import { permissionDenied } from "../support/gateway.js";
import { mockClient, type Through } from "../support/mock.js";

interface Sent {
  path: string;
  body: Record<string, unknown>;
}

/** Records every request the waiter's client sends. */
function recording(): { through: Through; sent: Sent[] } {
  const sent: Sent[] = [];
  const through: Through = (input, init, forward) => {
    sent.push({ path: new URL(input).pathname, body: JSON.parse(init.body || "{}") });
    return forward(input, init);
  };
  return { through, sent };
}

/** Two permits held by a client of its own, and a waiter on the recorded client. */
async function twoHeldAndAWaiter(wait: "watch" | "poll") {
  const { through, sent } = recording();
  const { etcd, mock } = mockClient({}, { through });
  const holders = mockClient({}, { mock }).etcd;
  const semaphore = (await holders.session({ ttl: 30, keepAlive: "manual" })).semaphore("pool", { permits: 2 });
  const held = [await semaphore.acquire(), await semaphore.acquire()];
  const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
  const from = sent.length;
  const waiting = session.semaphore("pool", { permits: 2 }).acquire({ wait, pollInterval: 50 });
  return { held, waiting, sent: () => sent.slice(from) };
}

describe("a semaphore's waiter", () => {
  it("that watches follows the deletes on one stream, reads nothing, and holds on the first delete", async () => {
    const { held, waiting, sent } = await twoHeldAndAWaiter("watch");
    await sleep(200);
    const paths = sent().map((s) => s.path);
    expect(paths).toEqual(["/v3/kv/txn", "/v3/watch"]);
    const watch = sent()[1]!.body.create_request as Record<string, unknown>;
    expect(watch).toMatchObject({ prev_kv: true, filters: ["NOPUT"] });
    await held[0]!.release();
    const permit = await within(1_000, "the waiter's permit", waiting);
    expect(sent().filter((s) => s.path === "/v3/kv/range")).toEqual([]);
    await permit.release();
    await held[1]!.release();
  });

  it("that polls opens no stream, and each read lists at most permits + 1 keys up to its own", async () => {
    const { held, waiting, sent } = await twoHeldAndAWaiter("poll");
    await sleep(200);
    const reads = sent().filter((s) => s.path === "/v3/kv/range");
    expect(reads.length).toBeGreaterThan(1);
    for (const read of reads) expect(read.body).toMatchObject({ limit: "3", max_create_revision: expect.any(String) });
    expect(sent().filter((s) => s.path === "/v3/watch")).toEqual([]);
    await held[0]!.release();
    const permit = await within(1_000, "the waiter's permit", waiting);
    await permit.release();
    await held[1]!.release();
  });
});

describe("a semaphore's waiter counts each departure ahead of it once", () => {
  it("not the one just before its join: a waiter that gave up then leaves the holder alone", async () => {
    const { etcd } = mockClient();
    const semaphore = async () =>
      (await etcd.session({ ttl: 30, keepAlive: "manual" })).semaphore("pool", { permits: 1 });
    const [holding, leaving, joining] = [await semaphore(), await semaphore(), await semaphore()];
    const holder = await holding.acquire();
    const giveUp = new AbortController();
    const left = leaving.acquire({ signal: giveUp.signal });
    await sleep(50);
    giveUp.abort();
    expect((await rejection(left)).code).toBe("ABORTED");
    // Its key's delete is the line's last change before this join: a watch from before the join would count it.
    const waiting = joining.acquire();
    expect(await stillPending(waiting, 300)).toBe(true);
    await holder.release();
    await (await within(1_000, "the waiter's permit", waiting)).release();
  });

  it("after its history was compacted away it counts everyone ahead again, not only up to its permits", async () => {
    let [watches, reads] = [0, 0];
    // Its first watch asks for history a compaction just removed: etcd cancels it, COMPACTED.
    const through: Through = async (input, init, forward) => {
      if (input.endsWith("/v3/kv/range")) reads++;
      if (!input.endsWith("/v3/watch") || ++watches > 1) return forward(input, init);
      await others.compact((await others.range({ prefix: "pool/", countOnly: true })).header.revision);
      const body = JSON.parse(init.body) as { create_request: Record<string, unknown> };
      body.create_request.start_revision = "1";
      return forward(input, { ...init, body: JSON.stringify(body) });
    };
    const { etcd, mock } = mockClient({}, { through });
    const others: Etcd = mockClient({}, { mock }).etcd;
    const pool = (await others.session({ ttl: 30, keepAlive: "manual" })).semaphore("pool", { permits: 2 });
    const held = [await pool.acquire(), await pool.acquire()];
    const ahead = [pool.acquire(), pool.acquire()];
    await sleep(50);
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const waiting = session.semaphore("pool", { permits: 2 }).acquire();
    await until("its count again", 1_000, () => reads === 1 && watches === 2);
    await sleep(100);
    // Four ahead, one leaves: three are, two of them waiters that now hold.
    await held[0]!.release();
    expect(await stillPending(waiting, 300)).toBe(true);
    await held[1]!.release();
    for (const permit of ahead) await (await permit).release();
    await (await within(1_000, "the waiter's permit", waiting)).release();
  });
});

describe("a semaphore's waiter meets what its join did not", () => {
  it("that polls: a holder's key cut loose by a put is a stranger, LOCK_NAME_CONFLICT at its next read", async () => {
    const { etcd } = mockClient();
    const pool = async () => (await etcd.session({ ttl: 30, keepAlive: "manual" })).semaphore("pool", { permits: 1 });
    const holder = await (await pool()).acquire();
    const waiting = rejection((await pool()).acquire({ wait: "poll", pollInterval: 50 }));
    await sleep(100);
    // Another client's put without a lease: the key no longer ends with any session, and would hold a permit for good.
    await etcd.put(holder.key, "1");
    const error = await within(1_000, "the refusal", waiting);
    expect(error.code).toBe("LOCK_NAME_CONFLICT");
    await etcd.delete(holder.key);
  });

  it("that watches: a watch refused for want of permission ends the wait with the refusal, not a loop", async () => {
    let reads = 0;
    const through: Through = async (input, init, forward) => {
      if (input.endsWith("/v3/kv/range")) reads++;
      return input.endsWith("/v3/watch") ? (permissionDenied() as never) : forward(input, init);
    };
    const { etcd, mock } = mockClient({}, { through });
    const others = mockClient({}, { mock }).etcd;
    const holder = await (await others.session({ ttl: 30, keepAlive: "manual" }))
      .semaphore("pool", { permits: 1 })
      .acquire();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const error = await within(1_000, "the refusal", rejection(session.semaphore("pool", { permits: 1 }).acquire()));
    expect(error.code).toBe("PERMISSION_DENIED");
    expect(reads).toBe(0);
    await holder.release();
  });
});
