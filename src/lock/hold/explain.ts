import type { EtcdClient } from "../../api/client.js";
import { cmp, op } from "../../api/txn.js";
import { leaseText } from "../../errors/catalogue.js";
import { isEtcdError } from "../../errors/etcd-error.js";
import type { CallOptions } from "../../gateway/transport.js";
import { type Request, requestFor, requestKey } from "../line/requests.js";

/** Why a holding ended before its release: told by `explainLoss`, one or two reads after the fact. */
export interface Loss {
  why: string;
  cause?: unknown;
  /** Its lease was gone: its session has lost it too. */
  leaseGone?: boolean | undefined;
  /** Its key's incarnation (its create revision) was still there, changed: no delete of it had landed. */
  stillThere?: boolean | undefined;
}

/** A key of a holding as the holding had it. */
export interface OwnKey {
  key: string;
  /** Its create revision: the holding's fencing token. */
  revision: number;
  /** Its mod revision as the holding has it: the join's, a ticket's takeover's, or its leader's last proclamation's. */
  modRevision: number;
}

/**
 * Why a holding's key(s) were gone or changed (undefined: they were not), from one read of them (and one of the
 * lease when a key is gone):
 * the handle must say why it lost its lock, not guess. Its lease ended, another client deleted a key, a plain
 * put rewrote one (cutting it loose from its lease), or a ticket moved it to another holder. A key at the
 * holding's key name that has no lease (its own incarnation cut loose by a put, or remade by a put after it went)
 * would block its line for good (no lease ends it): it is deleted here, guarded by the version that was read.
 */
export async function explainLoss(
  client: EtcdClient,
  leaseId: string,
  keys: readonly OwnKey[],
  options: CallOptions & { ticketed?: boolean | undefined },
): Promise<Loss | undefined> {
  const call = { signal: options.signal, timeout: options.timeout };
  const read = await client
    .txn()
    .then(...keys.map(({ key }) => op.get(key)))
    .commit(call);
  for (const [i, { key, revision, modRevision }] of keys.entries()) {
    const kv = read.responses[i]?.kvs[0];
    if (kv === undefined || kv.createRevision !== revision) {
      // Remade at our key's name without a lease (a plain put after it went): no acquisition but ours uses this
      // name, and no lease would ever end it, so it would block the line for good.
      if (kv?.lease === "0") await deleteUnchanged(client, key, kv.modRevision, call);
      const [gone, revoked] = await Promise.all([
        client.lease.timeToLive(leaseId, call).then(
          () => false,
          (error: unknown) => (isEtcdError(error, "LEASE_NOT_FOUND") ? true : Promise.reject(error)),
        ),
        revocation(client, key, revision, call),
      ]);
      if (gone) {
        const why = `its session's ${leaseText(leaseId)} ended (it expired or was revoked) while it was held`;
        return { why, leaseGone: true };
      }
      if (revoked !== undefined) return { why: revokedText(revoked) };
      return kv === undefined
        ? { why: `its key ${key} was deleted by another client while it was held` }
        : { why: `its key ${key} was deleted while it was held, and made again by another client` };
    }
    // Intact: the very version the holding has (its lease too: a lease changes only with a write, a new mod revision).
    if (kv.modRevision === modRevision) continue;
    if (kv.lease === "0" || kv.lease === leaseId) {
      // Still our incarnation, rewritten by someone: ours to delete, and without a lease it would never go.
      await deleteUnchanged(client, key, kv.modRevision, call);
      const how = kv.lease === "0" ? "a put without its lease, which would have kept it forever" : "another write";
      const why = `its key ${key} was overwritten by ${how} (the key was deleted, so it blocks nobody)`;
      return { why, stillThere: true };
    }
    const why = options.ticketed
      ? `it was taken over with its ticket (etcd.resumeLock): key ${key} is bound to ${leaseText(kv.lease)} now`
      : `its key ${key} was overwritten by a write with another lease (${leaseText(kv.lease)})`;
    return { why, stillThere: true };
  }
  return undefined;
}

/** How a loss by `operator.revokeLock` is told: the operator's reason, in their words. */
export function revokedText(request: Request): string {
  return `it was revoked (operator.revokeLock): ${request.reason}`;
}

/**
 * The revocation recorded for the holding of `key` at `revision`, if one was: read beside the lease, and
 * unknown (undefined) when RBAC grants no read of the records, as for any failure of this read.
 */
function revocation(
  client: EtcdClient,
  key: string,
  revision: number,
  call: CallOptions,
): Promise<Request | undefined> {
  return client.get(requestKey(key), call).then(
    (kv) => {
      const request = requestFor(kv?.value, revision);
      return request?.kind === "revoke" ? request : undefined;
    },
    () => undefined,
  );
}

/** Deletes `key` unless it changed since the read that saw it at `modRevision`. */
async function deleteUnchanged(client: EtcdClient, key: string, modRevision: number, call: CallOptions): Promise<void> {
  await client
    .txn()
    .if(cmp.modRevision(key, "==", modRevision))
    .then(op.delete(key))
    .commit({ ...call, idempotent: true });
}
