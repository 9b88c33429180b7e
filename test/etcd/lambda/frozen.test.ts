// examples/lambda/handler.mjs run as Lambda runs it (runtime.mjs beside this file: module loaded once, warm
// invocations reuse it) against a real etcd member, frozen with SIGSTOP past its 5 s lease:
//  (a) frozen while holding the lock: another client takes the lock once the lease expires, and after the
//      thaw the stale holder's fenced write is refused (LOCK_LOST) and the store holds only the other's work;
//  (b) the next warm invocation in the same module instance succeeds with a larger fencing token;
//  (c) frozen between invocations past the TTL: the module-scope client still works afterwards;
//  (d) a contended invocation may wait for the lock longer than its lease TTL (bounded by its own deadline).
// Runs in the etcd-3.x projects (on their shared member) and needs the build: `npm run build` first.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { op, type Lock, type Session } from "../../../src/index.js";
import type { EtcdOperator as Etcd } from "../../../src/operate/index.js";
import { sleep } from "../../support/async.js";
import { client, sharedEndpoint } from "../../support/etcd.js";
import { startSandbox, type Sandbox } from "./sandbox.js";

const LEASE_TTL_MS = 5_000; // the handler's LEASE_TTL_SECONDS
// etcd revokes an expired lease up to ~1 s after its TTL; 8.5 s leaves room for a slow machine.
const FREEZE_MS = 8_500;

interface HandlerResult {
  ok: boolean;
  reason?: string;
  fencingToken?: number;
  held?: boolean;
  message?: string;
}

let etcd: Etcd;
let sandbox: Sandbox;

beforeAll(async () => {
  etcd = client();
  sandbox = await startSandbox({ ETCD_ENDPOINTS: sharedEndpoint() });
});

afterAll(async () => {
  await sandbox?.kill();
});

const keys = (orderId: string) => ({
  lock: `orders/${orderId}/lock`,
  status: `orders/${orderId}/status`,
  token: `orders/${orderId}/token`,
});

describe("the Lambda example in a frozen sandbox (real etcd)", () => {
  const orderId = `frozen-${randomUUID()}`;
  const k = keys(orderId);
  let other: { session: Session; lock: Lock; writeRevision: number } | undefined;

  afterAll(async () => {
    await other?.session.close().catch(() => {});
  });

  it("(a) a holder frozen past its lease loses the lock to another client, " +
    "and its fenced write is refused", async () => {
    const first = sandbox.invoke<HandlerResult>({ orderId, status: "by-frozen", workMs: 3_000 }, { timeoutMs: 20_000 });
    const acquired = await sandbox.waitForLog(first.id, (e) => e?.msg === "lock acquired", 10_000);
    sandbox.freeze();
    const frozenAt = performance.now();
    const staleToken = acquired.fencingToken as number;

    try {
      // The frozen sandbox holds the lock in etcd: nobody else may take it while its lease lives.
      const before = await etcd.inspectLock(k.lock);
      expect(before.holder?.revision).toBe(staleToken);

      const session = await etcd.session({ ttl: 10 });
      const lock = await session.mutex(k.lock).lock({ timeout: 15_000 });
      const waited = performance.now() - frozenAt;
      // Granted only once the frozen holder's lease ran out (its lease was granted a little before the freeze).
      expect(waited).toBeGreaterThan(LEASE_TTL_MS - 1_000);
      expect(lock.revision).toBeGreaterThan(staleToken);

      const write = await etcd
        .txn()
        .if(lock.ifHeld())
        .then(op.put(k.status, "by-other"), op.put(k.token, String(lock.revision)))
        .commit();
      expect(write.succeeded).toBe(true);
      other = { session, lock, writeRevision: write.header.revision };

      const left = FREEZE_MS - (performance.now() - frozenAt);
      if (left > 0) await sleep(left);
    } finally {
      sandbox.thaw();
    }

    try {
      const { result, meta } = await first.done;
      expect(result).toEqual({ ok: false, reason: "LOCK_LOST", fencingToken: staleToken, held: false });
      expect(meta).toMatchObject({ pid: sandbox.pid, handlerLoads: 1, invocation: 1, coldStart: true });

      // Nothing the stale holder did after its lease expired reached the store: the other client's writes stand.
      const { kvs } = await etcd.range({ prefix: `orders/${orderId}/` });
      expect(kvs.map((kv) => [kv.key, kv.value, kv.createRevision, kv.modRevision])).toEqual([
        // A lock key's value is its holder's ticket secret (see lock.ticket()).
        [other!.lock.key, expect.stringMatching(/^[0-9a-f]{32}$/), other!.lock.revision, other!.lock.revision],
        [k.status, "by-other", other!.writeRevision, other!.writeRevision],
        [k.token, String(other!.lock.revision), other!.writeRevision, other!.writeRevision],
      ]);
      // The other client still holds the lock; it releases it now.
      expect((await etcd.inspectLock(k.lock)).holder?.revision).toBe(other!.lock.revision);
      await other!.lock.unlock();
    } finally {
      // Also when an assertion failed, so that (b) finds the lock free.
      await other?.session.close().catch(() => {});
    }
  }, 45_000);

  it("(b) the next warm invocation, in the same module instance, succeeds with a larger fencing token", async () => {
    expect(other, "needs (a)").toBeDefined();
    const { result, meta } = await sandbox.invoke<HandlerResult>({ orderId, status: "paid" }).done;
    expect(result).toEqual({ ok: true, fencingToken: expect.any(Number) });
    expect(result!.fencingToken).toBeGreaterThan(other!.lock.revision);
    expect(meta).toMatchObject({ pid: sandbox.pid, handlerLoads: 1, invocation: 2, coldStart: false });

    expect((await etcd.get(k.status))?.value).toBe("paid");
    expect((await etcd.get(k.token))?.value).toBe(String(result!.fencingToken));
    // Released in the handler: no lock key is left.
    expect((await etcd.range({ prefix: `${k.lock}/` })).kvs).toEqual([]);
  }, 30_000);

  it("(c) after a freeze between invocations longer than the lease, the module-scope client still works", async () => {
    const id = `thawed-${randomUUID()}`;
    const before = await sandbox.invoke<HandlerResult>({ orderId: id, status: "one" }).done;
    expect(before.result).toEqual({ ok: true, fencingToken: expect.any(Number) });

    sandbox.freeze();
    try {
      await sleep(6_000);
    } finally {
      sandbox.thaw();
    }

    const after = await sandbox.invoke<HandlerResult>({ orderId: id, status: "two" }).done;
    expect(after.result).toEqual({ ok: true, fencingToken: expect.any(Number) });
    expect(after.result!.fencingToken).toBeGreaterThan(before.result!.fencingToken!);
    expect(after.meta).toMatchObject({ pid: sandbox.pid, handlerLoads: 1, coldStart: false });
    expect(after.meta.invocation).toBe(before.meta.invocation + 1);
    expect((await etcd.get(keys(id).status))?.value).toBe("two");
    expect((await etcd.range({ prefix: `${keys(id).lock}/` })).kvs).toEqual([]);
  }, 30_000);

  // A "manual" session renews nothing by itself: the handler's renewWhile keeps it alive during the wait, so a
  // wait longer than the 5 s TTL still ends with the lock, not SESSION_EXPIRED.
  it("(d) a contended invocation waits for the lock longer than its lease TTL, within its own deadline", async () => {
    const id = `contended-${randomUUID()}`;
    const session = await etcd.session({ ttl: 30 });
    try {
      const held = await session.mutex(keys(id).lock).lock();
      const invocation = sandbox.invoke<HandlerResult>({ orderId: id, status: "waited" }, { timeoutMs: 15_000 });
      // Longer than the TTL plus etcd's expiry slack: the waiter's lease would be gone by now unless renewed.
      await sleep(LEASE_TTL_MS + 2_500);
      await held.unlock();
      const { result } = await invocation.done;
      expect(result).toEqual({ ok: true, fencingToken: expect.any(Number) });
      expect(result!.fencingToken).toBeGreaterThan(held.revision);
      expect((await etcd.get(keys(id).status))?.value).toBe("waited");
    } finally {
      await session.close();
    }
  }, 30_000);
});
