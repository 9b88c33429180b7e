import { leaseIdArg } from "../api/args.js";
import type { EtcdClient } from "../api/client.js";
import { cmp, op } from "../api/txn.js";
import { invalidArgument, lockLost } from "../errors/catalogue.js";
import { isEtcdError } from "../errors/etcd-error.js";
import type { CallOptions } from "../gateway/transport.js";
import { now } from "./clock.js";
import { type KeepAliveMode, keepAliveArg } from "./lease-session.js";
import { Lock, type LockTicket } from "./lock.js";
import { leaseHex, nameArg } from "./names.js";
import { guardedDelete } from "./queue.js";
import { Session } from "./session.js";
import { randomHex } from "./unique-key.js";

/**
 * Takes over a lock held by another process or invocation from its ticket (`lock.toJSON()`). One
 * transaction checks the key still has the ticket's revision and secret and replaces the secret, so a ticket
 * resumes at most once, and the sender's handle, whose version of the key is now stale, can neither write
 * fenced nor release. The returned lock's session adopts the lease (manual renewal by default) so it can be
 * renewed, used for fenced writes, and released. LOCK_LOST if the ticket is stale or was used already.
 */
export async function resumeLock(
  client: EtcdClient,
  ticket: LockTicket,
  options: CallOptions & { keepAlive?: KeepAliveMode | undefined } = {},
): Promise<Lock<Session>> {
  const { name, key, revision, secret } = checkTicket(ticket);
  const leaseId = leaseIdArg(ticket.leaseId, "ticket.leaseId");
  if (key !== `${name}/${leaseHex(leaseId)}`) {
    throw invalidArgument(`ticket.key ${key} does not match lock ${name} and lease ${leaseId}`);
  }
  const keepAlive = keepAliveArg(options.keepAlive, "manual");
  const lost = (cause?: unknown) =>
    lockLost(name, `it is no longer held by this ticket (key ${key}, revision ${revision})`, cause);
  const next = randomHex(16);
  // Check before adopting anything: a session on a ticket that turns out stale would renew a lease forever.
  const sentAt = now();
  const [lease, taken] = await Promise.all([
    client.lease.timeToLive(leaseId, options).catch((error: unknown) => {
      throw isEtcdError(error, "LEASE_NOT_FOUND") ? lost(error) : error;
    }),
    client
      .txn()
      .if(cmp.createRevision(key, "==", revision), cmp.value(key, "==", secret))
      .then(op.put(key, next, { lease: leaseId }))
      .commit({ signal: options.signal, timeout: options.timeout }),
  ]);
  if (!taken.succeeded) throw lost();
  const session = new Session(client, {
    id: leaseId,
    ttl: lease.grantedTtl,
    remaining: lease.ttl,
    sentAt,
    keepAlive,
  }).start();
  session.keys.use([key]);
  const release = guardedDelete(client, key);
  return new Lock({
    name,
    key,
    session,
    revision,
    header: taken.header,
    modRevision: taken.header.revision,
    secret: next,
    release,
  });
}

function checkTicket(ticket: unknown): LockTicket {
  const t = ticket as Partial<LockTicket> | null;
  if (
    typeof t !== "object" ||
    t === null ||
    typeof t.key !== "string" ||
    typeof t.name !== "string" ||
    !t.key.startsWith(`${t.name}/`) ||
    typeof t.revision !== "number" ||
    !Number.isSafeInteger(t.revision) ||
    t.revision <= 0 ||
    typeof t.secret !== "string" ||
    t.secret.length === 0
  ) {
    throw invalidArgument("a lock ticket must be { name, key, leaseId, revision, secret } as given by lock.toJSON()");
  }
  nameArg(t.name, "a lock");
  nameArg(t.key, "a lock key");
  return t as LockTicket;
}
