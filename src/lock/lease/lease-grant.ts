import { leaseToUse, ttlArg } from "../../api/args.js";
import type { EtcdClient } from "../../api/client.js";
import type { LeaseId } from "../../api/codec.js";
import { randomBytes } from "../../api/random.js";
import { describe, invalidArgument, sessionExpired } from "../../errors/catalogue.js";
import { isEtcdError } from "../../errors/etcd-error.js";
import type { CallOptions } from "../../gateway/transport.js";
import type { KeepAliveMode, LeaseGrant } from "./lease-session.js";

export interface SessionOptions extends CallOptions {
  /** Lease TTL in seconds. Default 60, as in etcd's Go client. */
  ttl?: number | undefined;
  /**
   * `"auto"`: renew every ttl/3 on a timer that does not keep the process alive. `"manual"`: no renewal
   * timer at all; call `renew()` (for frozen Lambdas and Workers between requests). Default `"auto"`.
   */
  keepAlive?: KeepAliveMode | undefined;
  /**
   * Adopts this lease instead of granting one (its remaining TTL is read from the server). Leases are
   * cluster-wide: any live lease is adopted, whatever namespace granted it; only that it is live is checked.
   */
  leaseId?: LeaseId | undefined;
}

export const DEFAULT_SESSION_TTL = 60;

/** `"auto"` (the default) or `"manual"`; anything else (null included) is refused. */
export function keepAliveArg(value: unknown, fallback: KeepAliveMode = "auto"): KeepAliveMode {
  if (value === undefined) return fallback;
  if (value !== "auto" && value !== "manual")
    throw invalidArgument(`keepAlive must be "auto" or "manual", got ${describe(value)}`);
  return value;
}

/** Grants a lease for a new session, or reads the one to adopt (`leaseId`). One request. */
export async function openLease(client: EtcdClient, options: SessionOptions = {}): Promise<LeaseGrant> {
  const keepAlive = keepAliveArg(options.keepAlive);
  if (options.ttl !== undefined) ttlArg(options.ttl);
  const sentAt = client.clock.now();
  if (options.leaseId !== undefined) {
    const leaseId = leaseToUse(options.leaseId, "leaseId");
    const lease = await client.lease.timeToLive(leaseId, options).catch((error: unknown) => {
      throw isEtcdError(error, "LEASE_NOT_FOUND") ? sessionExpired(leaseId, error) : error;
    });
    return { id: leaseId, ttl: lease.grantedTtl, remaining: lease.ttl, sentAt, keepAlive };
  }
  return grantOwn(client, options.ttl ?? DEFAULT_SESSION_TTL, options, sentAt, keepAlive);
}

/**
 * Grants a lease whose ID the session draws itself, so that the grant is safe to resend: a repeat of a grant
 * that landed finds the lease (ALREADY_EXISTS) instead of granting a second one. A grant sent over a dead
 * pooled connection (a sandbox thawed after its NAT forgot the connection) then moves on to another
 * connection after one attempt's deadline, as reads do, instead of failing the call. ALREADY_EXISTS on a first
 * send is another client's lease of the same ID: a new ID is drawn.
 */
async function grantOwn(
  client: EtcdClient,
  ttl: number,
  options: CallOptions,
  sentAt: number,
  keepAlive: KeepAliveMode,
): Promise<LeaseGrant> {
  for (let draws = 0; ; draws++) {
    const id = randomLeaseId();
    let sends = 0;
    const onSent = () => {
      sends++;
      options.onSent?.();
    };
    try {
      const lease = await client.lease.grant(ttl, { ...options, id, idempotent: true, onSent });
      return { id: lease.id, ttl: lease.ttl, remaining: lease.ttl, sentAt, keepAlive };
    } catch (error) {
      if (!isEtcdError(error, "ALREADY_EXISTS") || draws > 2) throw error;
      // A later send found what an earlier one granted (its answer was lost): the lease is ours.
      if (sends > 1) {
        const lease = await client.lease.timeToLive(id, options);
        return { id, ttl: lease.grantedTtl, remaining: lease.ttl, sentAt, keepAlive };
      }
    }
  }
}

/** A random lease ID: positive, below 2^63, never 0. Drawn at each grant, never ahead (see `randomBytes`). */
function randomLeaseId(): LeaseId {
  const [high, low] = new Uint32Array(randomBytes(8).buffer);
  return ((BigInt(high! & 0x7fffffff) << 32n) | BigInt(low!) || 1n).toString();
}
