import { leaseIdArg, ttlArg } from "../../api/args.js";
import type { EtcdClient } from "../../api/client.js";
import { cmp, op } from "../../api/txn.js";
import { invalidArgument, lockLost, withoutSecrets } from "../../errors/catalogue.js";
import { traceLock } from "../../events/channels.js";
import type { CallOptions } from "../../gateway/transport.js";
import { Acquisition } from "../acquire/acquisition.js";
import { nameArg, randomHex } from "../line/keys.js";
import { type KeepAliveMode, keepAliveArg, type LeaseGrant, openLease } from "../session/lease-grant.js";
import type { LeaseSession } from "../session/lease-session.js";
import { Lock, type LockTicket } from "./lock.js";

/** Options of `etcd.resumeLock()`. */
export interface ResumeOptions extends CallOptions {
  /** How the new lease is renewed. Default `"manual"`: a resumed lock usually lives in a serverless handler. */
  keepAlive?: KeepAliveMode | undefined;
  /** The new lease's TTL in seconds. Default: the sender's (`ticket.ttl`), else 60. */
  ttl?: number | undefined;
}

/**
 * Takes over a lock held by another process or invocation from its ticket (`lock.ticket()`): grants a lease
 * of its own, then one transaction checks the key still has the ticket's revision and secret, writes a new
 * secret and moves the key to the new lease. So a ticket resumes at most once; the sender's handle, whose
 * version of the key is now stale, can neither write fenced nor release; and the lock no longer depends on the
 * sender's lease: the sender closing its session (which revokes its lease) leaves it held. The key keeps its
 * name and create revision: its place in the line and its fencing token. LOCK_LOST if the ticket is stale or
 * was used already; then, and after a takeover whose answer was lost, the new lease is revoked (so a takeover
 * that did land releases the lock rather than strand it).
 */
export async function resumeLock<S extends LeaseSession>(
  client: EtcdClient,
  ticket: LockTicket,
  options: ResumeOptions,
  open: (grant: LeaseGrant) => S,
): Promise<Lock<S>> {
  const checked = checkTicket(ticket);
  return traceLock("lock", checked.name, () => resume(client, checked, options, open));
}

async function resume<S extends LeaseSession>(
  client: EtcdClient,
  ticket: LockTicket,
  options: ResumeOptions,
  open: (grant: LeaseGrant) => S,
): Promise<Lock<S>> {
  const { name, key, revision, secret } = ticket;
  const keepAlive = keepAliveArg(options.keepAlive, "manual");
  const ttl = options.ttl ?? ticket.ttl;
  if (ttl !== undefined) ttlArg(ttl, options.ttl === undefined ? "ticket.ttl" : "ttl");
  const call = { signal: options.signal, timeout: options.timeout };
  const grant = await openLease(client, { ...call, ttl, keepAlive });
  const next = randomHex(16);
  let taken: Awaited<ReturnType<typeof takeOver>>;
  try {
    taken = await takeOver(client, key, revision, secret, next, grant.id, call);
  } catch (error) {
    void client.lease.revoke(grant.id).catch(() => {});
    throw withoutSecrets(error, [secret, next]);
  }
  if (!taken.succeeded) {
    void client.lease.revoke(grant.id).catch(() => {});
    throw lockLost(name, `it is no longer held by this ticket (key ${key}, revision ${revision})`);
  }
  const session = open(grant).start();
  const acquisition = new Acquisition(session, {}, { kind: "lock", name }, [key]);
  try {
    await acquisition.claim(true);
    const modRevision = taken.header.revision;
    const lock = new Lock({ name, key, session, revision, header: taken.header, modRevision, secret: next });
    return acquisition.hold(lock);
  } catch (error) {
    throw await acquisition.fail(error);
  } finally {
    acquisition.dispose();
  }
}

/** The key still as the ticket says: a new secret, and the new lease. */
function takeOver(
  client: EtcdClient,
  key: string,
  revision: number,
  secret: string,
  next: string,
  leaseId: string,
  options: CallOptions,
) {
  return client
    .txn()
    .if(cmp.createRevision(key, "==", revision), cmp.value(key, "==", secret))
    .then(op.put(key, next, { lease: leaseId }))
    .commit(options);
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
    throw invalidArgument("a lock ticket must be { name, key, leaseId, revision, secret } as given by lock.ticket()");
  }
  nameArg(t.name, "a lock");
  nameArg(t.key, "a lock key");
  leaseIdArg(t.leaseId, "ticket.leaseId");
  if (!/^[1-9a-f][0-9a-f]*$/.test(t.key.slice(t.name.length + 1))) {
    throw invalidArgument(`ticket.key ${t.key} is not a key of lock ${t.name} (<name>/<lease ID in hex>)`);
  }
  return t as LockTicket;
}
