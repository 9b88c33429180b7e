// The gRPC client etcd3 (npm) in the two shapes the bench compares against. Its lock API is one-shot:
// `lock(name)` grants a fresh lease, puts `name` if absent, and releases by revoking the lease; it fails
// at once (EtcdLockFailedError) when the name is held, and has no waiting line.
import { EtcdLockFailedError } from "etcd3";
import { sleep } from "./bounded.mjs";

/**
 * etcd3's lock API cannot reuse a lease, so the session-lock comparison sends etcd-edge's own two
 * transactions through etcd3's KV API on one lease granted up front (kept alive by etcd3): the enqueue
 * (put-if-absent bound to the lease, holder read, two newest keys) and the guarded delete.
 */
export function etcd3Mutex(client, name, leaseId) {
  const key = `${name}/${BigInt(leaseId).toString(16)}`;
  const prefix = `${name}/`;
  // Without values, as etcd-edge reads them (etcd3's builders set keys_only only on a read they send themselves).
  const keysOnly = (range) => Object.assign(range, { request: { ...range.request, keys_only: true } });
  const oldest = () => keysOnly(client.getAll().prefix(prefix).sort("Create", "Ascend").limit(1));
  return {
    async lock() {
      const res = await client
        .if(key, "Create", "==", 0)
        .then(client.put(key).value("").lease(leaseId), oldest(), keysOnly(client.getAll().prefix(prefix).sort("Create", "Descend").limit(2)))
        .else(client.get(key), oldest())
        .commit();
      const revision = String(res.header.revision);
      if (!res.succeeded || String(res.responses[1].response_range.kvs[0].create_revision) !== revision) {
        throw new Error(`etcd3 mutex on ${name} not acquired`);
      }
      return revision;
    },
    async unlock(revision) {
      const res = await client.if(key, "Create", "==", revision).then(client.delete().key(key)).commit();
      if (!res.succeeded) throw new Error(`etcd3 unlock on ${name} found no key`);
    },
  };
}

/**
 * A held name makes etcd3's `acquire()` fail at once (after granting and revoking a lease), so a user
 * retries: here with a jittered exponential backoff from 1 ms up to 16 ms, until `timeout` ms have passed.
 * Resolves to the held etcd3 Lock (release it with `lock.release()`).
 */
export async function etcd3LockRetrying(client, name, { ttl, timeout }) {
  const deadline = performance.now() + timeout;
  for (let attempt = 0; ; attempt++) {
    const lock = client.lock(name).ttl(ttl);
    try {
      return await lock.acquire();
    } catch (error) {
      if (!(error instanceof EtcdLockFailedError)) throw error;
    }
    if (performance.now() >= deadline) throw Object.assign(new Error(`etcd3 lock ${name}: still held after ${timeout} ms`), { code: "TIMEOUT" });
    await sleep(Math.min(2 ** attempt, 16) * (0.5 + Math.random()));
  }
}
