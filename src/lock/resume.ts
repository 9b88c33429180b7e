import { leaseIdArg } from "../api/args.js";
import type { EtcdClient } from "../api/client.js";
import { invalidArgument, lockLost } from "../errors/catalogue.js";
import { isEtcdError } from "../errors/etcd-error.js";
import type { CallOptions } from "../gateway/transport.js";
import { now } from "./clock.js";
import type { KeepAliveMode } from "./lease-session.js";
import { Lock, type LockTicket } from "./lock.js";
import { Session } from "./session.js";

/**
 * Takes over a lock held by another process or invocation from its ticket (`lock.toJSON()`), after checking
 * that the key still exists with the ticket's revision. The returned lock's session adopts the lease
 * (manual renewal by default) so it can be renewed, used for fenced writes, and released.
 */
export async function resumeLock(
  client: EtcdClient,
  ticket: LockTicket,
  options: CallOptions & { keepAlive?: KeepAliveMode | undefined } = {},
): Promise<Lock<Session>> {
  const { name, key, revision } = checkTicket(ticket);
  const leaseId = leaseIdArg(ticket.leaseId, "ticket.leaseId");
  if (key !== `${name}/${BigInt(leaseId).toString(16)}`) {
    throw invalidArgument(`ticket.key ${key} does not match lock ${name} and lease ${leaseId}`);
  }
  const keepAlive = options.keepAlive ?? "manual";
  if (keepAlive !== "auto" && keepAlive !== "manual") {
    throw invalidArgument(`keepAlive must be "auto" or "manual", got ${String(keepAlive)}`);
  }
  const lost = (cause?: unknown) => lockLost(name, `it is no longer held by this ticket (key ${key}, revision ${revision})`, cause);
  // Check before adopting anything: a session on a ticket that turns out stale would renew a lease forever.
  const sentAt = now();
  const [lease, found] = await Promise.all([
    client.lease.timeToLive(leaseId, options).catch((error: unknown) => {
      throw isEtcdError(error, "LEASE_NOT_FOUND") ? lost(error) : error;
    }),
    client.range({ key, signal: options.signal, timeout: options.timeout }),
  ]);
  const current = found.kvs[0];
  if (current === undefined || current.createRevision !== revision || current.lease !== leaseId) throw lost();
  const session = new Session(client, { id: leaseId, ttl: lease.grantedTtl, remaining: lease.ttl, sentAt, keepAlive }).start();
  return new Lock({ name, key, session, revision, header: found.header });
}

function checkTicket(ticket: unknown): LockTicket {
  const t = ticket as Partial<LockTicket> | null;
  if (
    typeof t !== "object" || t === null ||
    typeof t.name !== "string" || t.name.length === 0 ||
    typeof t.key !== "string" || !t.key.startsWith(`${t.name}/`) ||
    typeof t.revision !== "number" || !Number.isSafeInteger(t.revision) || t.revision <= 0
  ) {
    throw invalidArgument("a lock ticket must be { name, key, leaseId, revision } as given by lock.toJSON()");
  }
  return t as LockTicket;
}
