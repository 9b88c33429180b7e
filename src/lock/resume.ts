import { leaseIdArg } from "../args.js";
import type { Etcd } from "../client.js";
import { EtcdError, invalidArgument } from "../errors.js";
import type { CallOptions } from "../gateway/transport.js";
import { Lock, type LockTicket } from "./lock.js";
import { type KeepAliveMode, Session } from "./session.js";

/**
 * Takes over a lock held by another process or invocation from its ticket (`lock.toJSON()`), after checking
 * that the key still exists with the ticket's revision. The returned lock's session adopts the lease
 * (manual renewal by default) so it can be renewed, used for fenced writes, and released.
 */
export async function resumeLock(
  etcd: Etcd,
  ticket: LockTicket,
  options: CallOptions & { keepAlive?: KeepAliveMode | undefined } = {},
): Promise<Lock> {
  const { name, key, revision } = checkTicket(ticket);
  const leaseId = leaseIdArg(ticket.leaseId, "ticket.leaseId");
  const [session, found] = await Promise.all([
    Session.create(etcd, { leaseId, keepAlive: options.keepAlive ?? "manual", signal: options.signal, timeout: options.timeout }),
    etcd.range({ key, signal: options.signal, timeout: options.timeout }),
  ]);
  const current = found.kvs[0];
  if (current === undefined || current.createRevision !== revision || current.lease !== leaseId) {
    throw new EtcdError("LOCK_LOST", `lock ${name} is no longer held by this ticket (key ${key}, revision ${revision})`);
  }
  const mutex = session.mutex(name);
  if (mutex.key !== key) throw invalidArgument(`ticket.key ${key} does not match lock ${name} and lease ${leaseId}`);
  return new Lock(mutex, revision, found.header);
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
