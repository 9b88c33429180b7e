import type { EtcdClient } from "../../api/client.js";
import { isEtcdError } from "../../errors/etcd-error.js";
import { untilAnswered } from "../resend/until-answered.js";

/** What keeping a lease alive needs of its session. */
export interface Kept {
  readonly client: EtcdClient;
  readonly leaseId: string;
  /** The lease's TTL in seconds. */
  readonly ttl: number;
  /** Whether the lease is trusted now; a deadline found past ends the trust (LeaseSession.trusted). */
  trusted(): boolean;
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
      if (stopped || !lease.trusted()) return;
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
          if (!stopped && lease.trusted()) schedule(Math.min(1_000, lease.remaining() / 2));
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
 * Revokes a lease nobody trusts any more, resent until etcd answers, for two TTLs at most (it ends by itself by
 * then; `over` ends it sooner), on timers that keep no process alive. Resolves true once it is gone. For a lease
 * abandoned past its deadline (etcd may still hold it, and a newly elected leader extends every lease by its TTL,
 * so its keys could block their lines for another TTL after the cluster is back: Go leaves them to expire), and
 * for a takeover that went unanswered (a lock taken over for nobody is freed at once, not after the lease's TTL).
 */
export async function revokeUntilGone(
  client: EtcdClient,
  leaseId: string,
  ttl: number,
  over: () => boolean = () => false,
): Promise<boolean> {
  const until = client.clock.now() + 2 * ttl * 1000;
  const left = () => until - client.clock.now();
  const revoke = () =>
    client.lease.revoke(leaseId, { timeout: Math.max(1, Math.min(left(), ttl * 1000)), idempotent: true }).then(
      () => true,
      (error: unknown) => (isEtcdError(error, "LEASE_NOT_FOUND") ? true : Promise.reject(error)),
    );
  if (over()) return false;
  return untilAnswered(revoke, { over: () => over() || left() <= 0, background: true }).catch(() => false);
}
