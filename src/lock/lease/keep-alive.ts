import type { EtcdClient } from "../../api/client.js";
import { isEtcdError } from "../../errors/etcd-error.js";
import { delay } from "../../gateway/signals.js";
import { resendPause } from "./release-sends.js";

/** What keeping a lease alive needs of its session. */
export interface Kept {
  readonly client: EtcdClient;
  readonly leaseId: string;
  /** The lease's TTL in seconds. */
  readonly ttl: number;
  readonly alive: boolean;
  remaining(): number;
  renew(options: { timeout: number; attemptTimeout: number; background: true }): Promise<number>;
}

/**
 * Renews whenever two thirds of the TTL or less is left (every ttl/3 once in step; at once if already less is
 * left), sooner after a failure, until the returned function is called or the lease is lost.
 */
export function renewEvery(lease: Kept): () => void {
  let cancel: (() => void) | undefined;
  let stopped = false;
  const dueIn = () => Math.max(0, lease.remaining() - (lease.ttl * 1000 * 2) / 3);
  const schedule = (delay: number) => {
    cancel = lease.client.clock.setTimer(() => {
      if (stopped || !lease.alive) return;
      // Each renewal may take at most the time left, so a slow answer cannot extend trust past the deadline;
      // each endpoint gets a share of it, so a silent member cannot use it all up.
      const left = lease.remaining();
      const endpoints = Math.max(2, lease.client.config.endpoints.length);
      const attemptTimeout = Math.max(250, left / endpoints);
      lease.renew({ timeout: Math.max(1, left), attemptTimeout, background: true }).then(
        () => stopped || schedule(dueIn()),
        (error: unknown) => {
          const events = lease.client.transport.events;
          if (events.on) {
            const code = isEtcdError(error) ? error.code : "UNKNOWN";
            events.emit({ type: "session.renewFailed", leaseId: lease.leaseId, code });
          }
          // A transient failure: try again soon while the deadline allows; a lost lease has already aborted.
          if (!stopped && lease.alive) schedule(Math.min(1_000, lease.remaining() / 2));
        },
      );
    }, delay);
  };
  schedule(dueIn());
  return () => {
    stopped = true;
    cancel?.();
  };
}

/**
 * A lease whose deadline passed without a renewal (an outage, a cluster without a leader) is lost to its
 * session, but etcd may still hold it, and a newly elected leader extends every lease by its TTL, so its keys
 * could block their lines for another TTL after the cluster is back. Go leaves them to expire. Here the lease is
 * revoked as soon as etcd answers: resent after growing pauses for at most two TTLs (`over` ends it sooner), on
 * timers that keep no process alive. Resolves true once it is gone.
 */
export async function revokeAbandoned(client: EtcdClient, leaseId: string, ttl: number, over: () => boolean) {
  const now = () => client.clock.now();
  const until = now() + 2 * ttl * 1000;
  for (let failures = 0; !over() && now() < until; failures++) {
    try {
      await client.lease.revoke(leaseId, {
        timeout: Math.max(1, Math.min(until - now(), ttl * 1000)),
        idempotent: true,
      });
      return true;
    } catch (error) {
      if (isEtcdError(error, "LEASE_NOT_FOUND")) return true;
      await delay(resendPause(failures), undefined, true);
    }
  }
  return false;
}
