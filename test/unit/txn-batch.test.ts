// Joins and releases that callers of one client start in the same turn go as one transaction of nested
// transactions (TxnBatcher): fewer requests, the same answers as alone, and no caller held by another.
import { describe, expect, it } from "vitest";
import { isEtcdError } from "../../src/index.js";
import { rejection, sleep, until } from "../support/async.js";
import { mockClient } from "../support/mock.js";

/** A client on a fresh mock whose txn requests are recorded, body by body. */
function recorded(hold?: (body: string, signal: AbortSignal | undefined) => Promise<void> | undefined) {
  const txns: string[] = [];
  const { mock, etcd } = mockClient(
    {},
    {
      through: async (input, init, forward) => {
        if (input.endsWith("/v3/kv/txn")) {
          txns.push(init.body);
          await hold?.(init.body, init.signal);
        }
        return forward(input, init);
      },
    },
  );
  return { mock, txns, etcd };
}

const batched = (body: string) => body.startsWith('{"success":[{"request_txn":');

describe("joins and releases started in the same turn", () => {
  it("locks on distinct names: one request each way, each lock with its own key and the batch's revision", async () => {
    const { mock, txns, etcd } = recorded();
    const sessions = await Promise.all([0, 1, 2].map(() => etcd.session({ ttl: 30 })));
    txns.length = 0;
    const locks = await Promise.all(sessions.map((s, i) => s.mutex(`job${i}`).lock()));
    expect(txns).toHaveLength(1);
    expect(batched(txns[0]!)).toBe(true);
    expect(new Set(locks.map((l) => l.revision)).size).toBe(1);
    for (const [i, lock] of locks.entries()) expect(mock.keys(`job${i}/`)).toEqual([lock.key]);
    await Promise.all(locks.map((l) => l.unlock()));
    expect(txns).toHaveLength(2);
    expect(batched(txns[1]!)).toBe(true);
    for (const i of [0, 1, 2]) expect(mock.keys(`job${i}/`)).toEqual([]);
  });

  it("a lone lock sends its own transaction, unwrapped", async () => {
    const { txns, etcd } = recorded();
    const session = await etcd.session({ ttl: 30 });
    txns.length = 0;
    await (await session.mutex("alone").lock()).unlock();
    expect(txns).toHaveLength(2);
    expect(txns.some(batched)).toBe(false);
  });

  it("one name twice never shares a request: the line orders them", async () => {
    const { mock, txns, etcd } = recorded();
    const [a, b] = await Promise.all([0, 1].map(() => etcd.session({ ttl: 30 })));
    txns.length = 0;
    const first = a!.mutex("same").lock();
    const second = b!.mutex("same").lock();
    const held = await first;
    await until("the second in line", 5_000, () => mock.keys("same/").length === 2);
    // The second waits behind the first, in requests of its own, with its own revision.
    expect(txns.filter(batched)).toHaveLength(0);
    await held.unlock();
    const next = await second;
    expect(next.revision).toBeGreaterThan(held.revision);
    await next.unlock();
    expect(txns.filter(batched)).toHaveLength(0);
  });

  it("a name and a name under it never share a join", async () => {
    const { mock, txns, etcd } = recorded();
    const [a, c] = await Promise.all([0, 1].map(() => etcd.session({ ttl: 30 })));
    txns.length = 0;
    const [outer, inner] = await Promise.all([a!.mutex("nest").lock(), c!.mutex("nest/inner").lock()]);
    expect(mock.keys("nest/")).toHaveLength(2);
    expect(txns.filter(batched)).toHaveLength(0);
    // Their releases may share one: each touches its own key alone.
    await Promise.all([inner.unlock(), outer.unlock()]);
    expect(mock.keys("nest/")).toEqual([]);
  });

  it(
    "refused as a whole (one session's lease is gone): " + "each join is sent again alone and gets its own answer",
    async () => {
      const { txns, etcd } = recorded();
      const live = await etcd.session({ ttl: 30 });
      const gone = await etcd.session({ ttl: 30, keepAlive: "manual" });
      await etcd.lease.revoke(gone.leaseId);
      txns.length = 0;
      const [ok, refused] = await Promise.allSettled([live.mutex("live").lock(), gone.mutex("gone").lock()]);
      expect(ok.status).toBe("fulfilled");
      expect(refused.status).toBe("rejected");
      expect(isEtcdError((refused as PromiseRejectedResult).reason)).toBe(true);
      // The batch, then each alone.
      expect(batched(txns[0]!)).toBe(true);
      expect(txns.slice(1).filter((b) => b.includes('"request_put"') && !batched(b))).toHaveLength(2);
      await (ok as PromiseFulfilledResult<{ unlock(): Promise<unknown> }>).value.unlock();
    },
  );

  it("a caller that gives up stops waiting at once; the others in its request get their answers", async () => {
    let release: (() => void) | undefined;
    const gate = new Promise<void>((r) => (release = r));
    const { etcd } = recorded((body) => (batched(body) ? gate : undefined));
    const [a, b] = await Promise.all([0, 1].map(() => etcd.session({ ttl: 30 })));
    const quit = new AbortController();
    const quitting = a!.mutex("q1").lock({ signal: quit.signal });
    const staying = b!.mutex("q2").lock();
    await sleep(10);
    quit.abort(new Error("enough"));
    const error = await rejection(quitting);
    expect(isEtcdError(error, "ABORTED")).toBe(true);
    release!();
    const held = await staying;
    expect(held.key.startsWith("q2/")).toBe(true);
    await held.unlock();
  });

  it("releases whose callers all give up end their shared request; while one still waits it goes on", async () => {
    let release: (() => void) | undefined;
    const gate = new Promise<void>((r) => (release = r));
    let shared: AbortSignal | undefined;
    const { mock, etcd } = recorded((body, signal) => {
      if (!batched(body) || !body.includes('"request_delete_range"')) return undefined;
      shared ??= signal;
      return gate;
    });
    const [a, b] = await Promise.all([0, 1].map(() => etcd.session({ ttl: 30 })));
    const [la, lb] = await Promise.all([a!.mutex("r1").lock(), b!.mutex("r2").lock()]);
    const [qa, qb] = [new AbortController(), new AbortController()];
    const ua = la!.unlock({ signal: qa.signal });
    const ub = lb!.unlock({ signal: qb.signal });
    await sleep(10);
    expect(shared?.aborted).toBe(false);
    qa.abort(new Error("enough"));
    expect((await rejection(ua)).code).toBe("ABORTED");
    expect(shared?.aborted).toBe(false);
    qb.abort(new Error("enough too"));
    expect((await rejection(ub)).code).toBe("ABORTED");
    expect(shared?.aborted).toBe(true);
    release!();
    // Each release goes on in the background and the keys go.
    for (let i = 0; i < 100 && mock.keys("r1/").length + mock.keys("r2/").length > 0; i++) await sleep(20);
    expect([...mock.keys("r1/"), ...mock.keys("r2/")]).toEqual([]);
  });

  it("a call with bad options started beside good ones is refused alone, before anything is sent", async () => {
    const { mock, txns, etcd } = recorded();
    const [a, b] = await Promise.all([0, 1].map(() => etcd.session({ ttl: 30 })));
    const [la, lb] = await Promise.all([a!.mutex("b1").lock(), b!.mutex("b2").lock()]);
    txns.length = 0;
    const bad = la!.unlock({ signal: [] as unknown as AbortSignal });
    const good = lb!.unlock();
    expect((await rejection(bad)).code).toBe("INVALID_ARGUMENT");
    await good;
    expect(mock.keys("b2/")).toEqual([]);
    expect(txns.filter(batched)).toEqual([]);
    expect(la!.held).toBe(true);
    await la!.unlock();
  });
});
