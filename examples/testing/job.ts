// A job that runs under a lock and records its result with a fenced write: the example docs/testing.md tests.
// `work(signal)` must stop when `signal` aborts: the lock's signal aborts the moment the lock is lost.
import { type Etcd, isEtcdError, op } from "etcd-edge";

/** Runs `work` holding lock `name`; "done" once its result is recorded, "lost" if the lock went first. */
export async function runJob(
  etcd: Etcd,
  name: string,
  work: (signal: AbortSignal) => Promise<unknown>,
): Promise<"done" | "lost"> {
  const session = await etcd.session({ ttl: 10, keepAlive: "manual" });
  try {
    const lock = await session.renewWhile(() => session.mutex(name).lock({ timeout: 5_000 }));
    let result: unknown;
    try {
      result = await work(lock.signal);
    } catch (error) {
      if (lock.signal.aborted) return "lost";
      throw error;
    }
    // Recorded only while the lock is still ours: a stale holder's write is refused.
    const recorded = await lock.unlockWith([op.put(`results/${name}`, String(result))]).then(
      () => true,
      (error: unknown) => (isEtcdError(error, "LOCK_LOST") ? false : Promise.reject(error)),
    );
    return recorded ? "done" : "lost";
  } finally {
    await session.close().catch(() => {});
  }
}
