// The gRPC client etcd3 (npm) in the two shapes the bench compares against. Its lock API is one-shot:
// `lock(name)` grants a fresh lease, puts `name` if absent, and releases by revoking the lease; it fails
// at once (EtcdLockFailedError) when the name is held, and has no waiting line.
import { CompareResult, CompareTarget, EtcdLockFailedError } from "etcd3";
import { sleep } from "./bounded.mjs";

/**
 * etcd3's lock API cannot reuse a lease, so the session-lock comparison sends etcd-edge's own two
 * transactions through etcd3's gRPC KV client (`client.kv.txn`, as etcd3's builders do, but with what they
 * cannot express: a compare over a range) on one lease granted up front (kept alive by etcd3): the join
 * (the put alone into an empty line, as an etcd-edge mutex sends it while its line was empty at its last
 * joins) and the guarded delete.
 */
export function etcd3Mutex(client, name, leaseId) {
  const key = Buffer.from(`${name}/${BigInt(leaseId).toString(16)}`);
  const line = { key: Buffer.from(`${name}/`), range_end: Buffer.from(`${name}0`) };
  // A value as long as etcd-edge's secret.
  const put = { request_put: { key, value: Buffer.from("0".repeat(32)), lease: leaseId } };
  // etcd3's serializer takes enums as numbers.
  const join = {
    compare: [{ ...line, target: CompareTarget.Version, result: CompareResult.Equal, version: 0 }],
    success: [put],
    failure: [],
  };
  return {
    async lock() {
      const res = await client.kv.txn(join);
      if (!res.succeeded) throw new Error(`etcd3 mutex on ${name} not acquired`);
      return String(res.header.revision);
    },
    async unlock(revision) {
      const res = await client.kv.txn({
        compare: [{ key, target: CompareTarget.Mod, result: CompareResult.Equal, mod_revision: revision }],
        success: [{ request_delete_range: { key } }],
        failure: [],
      });
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
    if (performance.now() >= deadline)
      throw Object.assign(new Error(`etcd3 lock ${name}: still held after ${timeout} ms`), { code: "TIMEOUT" });
    await sleep(Math.min(2 ** attempt, 16) * (0.5 + Math.random()));
  }
}
