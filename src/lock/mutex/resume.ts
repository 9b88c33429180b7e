import { leaseIdArg, ttlArg } from "../../api/args.js";
import type { EtcdClient } from "../../api/client.js";
import type { ResponseHeader } from "../../api/codec.js";
import { cmp, op } from "../../api/txn.js";
import { invalidArgument, lockLost, withoutSecrets } from "../../errors/catalogue.js";
import { unanswered } from "../../errors/etcd-error.js";
import { traceLock } from "../../events/channels.js";
import type { CallOptions } from "../../gateway/transport.js";
import { randomHex } from "../../api/random.js";
import { Acquisition } from "../acquire/acquisition.js";
import { revokeUntilGone } from "../lease/keep-alive.js";
import { keepAliveArg, openLease } from "../lease/lease-grant.js";
import type { KeepAliveMode, LeaseGrant, LeaseSession } from "../lease/lease-session.js";
import { isKeyOf, nameArg } from "../line/keys.js";
import { Lock, type LockTicket } from "./lock.js";

/** Options of `etcd.resumeLock()`. */
export interface ResumeOptions extends CallOptions {
  /** How the new lease is renewed. Default `"manual"`: a resumed lock usually lives in a serverless handler. */
  keepAlive?: KeepAliveMode | undefined;
  /** The new lease's TTL in seconds. Default: the sender's (`ticket.ttl`), else 60. */
  ttl?: number | undefined;
}

/**
 * Takes over a lock held by another process or invocation from its ticket (`lock.ticket()`): grants a lease of
 * its own, then one transaction checks the key still has the ticket's revision and secret, writes a new secret
 * and moves the key to the new lease. So a ticket resumes at most once; the sender's handle, whose version of
 * the key is now stale, can neither write fenced nor release; and the lock no longer depends on the sender's
 * lease. The key keeps its name and create revision: its place in the line and its fencing token.
 *
 * The takeover is safe to resend (a repeat finds the key already moved to our lease with our secret, and reads
 * it back), so a lost answer is sent again within the call's budget. LOCK_LOST if the ticket is stale or was
 * used already. When no answer comes at all, the takeover may have landed: the new lease is revoked, resent
 * until answered, so a lock taken over for nobody is released rather than stranded for the lease's TTL.
 */
export async function resumeLock<S extends LeaseSession>(
  client: EtcdClient,
  ticket: LockTicket,
  options: ResumeOptions,
  open: (grant: LeaseGrant) => S,
): Promise<Lock<S>> {
  const checked = checkTicket(ticket);
  return traceLock("lock", checked.name, options, () => resume(client, checked, options, open));
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
  let modRevision: number | undefined;
  let header: ResponseHeader;
  try {
    const taken = await client
      .txn()
      .if(cmp.createRevision(key, "==", revision), cmp.value(key, "==", secret))
      .then(op.put(key, next, { lease: grant.id }))
      .else(op.get(key))
      .commit({ ...call, idempotent: true });
    header = taken.header;
    if (taken.succeeded) modRevision = taken.header.revision;
    else {
      // A resend finds what an earlier send of ours did: the key on our lease with our secret.
      const kv = taken.responses[0].kvs[0];
      if (kv?.createRevision === revision && kv.lease === grant.id && kv.value === next) modRevision = kv.modRevision;
    }
  } catch (error) {
    if (unanswered(error)) void revokeUntilGone(client, grant.id, grant.ttl);
    else void client.lease.revoke(grant.id).catch(() => {});
    throw withoutSecrets(error, [secret, next]);
  }
  if (modRevision === undefined) {
    void client.lease.revoke(grant.id).catch(() => {});
    throw lockLost(name, `it is no longer held by this ticket (key ${key}, revision ${revision})`);
  }
  const session = open(grant).start();
  const lock = new Lock({ name, key, session, revision, header, modRevision, secret: next });
  return new Acquisition(session, {}, { kind: "lock", name }, [{ key, value: next }]).hold(lock);
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
  if (!isKeyOf("mutex", `${t.name}/`, t.key)) {
    throw invalidArgument(`ticket.key ${t.key} is not a key of lock ${t.name} (<name>/<lease ID in hex>_<16 hex>)`);
  }
  return t as LockTicket;
}
