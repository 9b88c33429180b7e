import type { EtcdClient } from "../../api/client.js";
import { cmp, op } from "../../api/txn.js";
import type { CallOptions } from "../../gateway/transport.js";

/**
 * Leaving the line: deleting our key(s), each only while it is still the incarnation we made (its create
 * revision), so that a late or repeated delete never takes a later contender's key. Every delete here is safe
 * to resend, and says whether what it guards was there to delete.
 */

/**
 * Deletes `keys`, all created at `revision`, in one request. All of them if each still has that revision, else
 * each one that still has it. With the revision unknown (a join whose answer was lost, which may have
 * landed) they are deleted unguarded: the caller still has the session's local turn on them, so no other
 * contender of this session can be using them. Returns whether all of them were there.
 */
export async function leave(
  client: EtcdClient,
  keys: readonly string[],
  revision: number | undefined,
  options: CallOptions = {},
): Promise<boolean> {
  const call = { ...options, idempotent: true };
  if (revision === undefined) {
    await client
      .txn()
      .then(...keys.map((key) => op.delete(key)))
      .commit(call);
    return true;
  }
  const guards = keys.map((key) => cmp.createRevision(key, "==", revision));
  const deletes = keys.map((key) => op.delete(key));
  const txn = client
    .txn()
    .if(...guards)
    .then(...deletes);
  // One key: its guard is the whole condition. Several: those still there go even if one is gone.
  const several = keys.length > 1 ? txn.else(...deletes.map((remove, i) => op.txn([guards[i]!], [remove]))) : txn;
  const result = await several.commit(call);
  return result.succeeded;
}

/**
 * Deletes `key` only while its mod revision is `modRevision`: the release of a mutex's lock, whose key a ticket
 * rewrites (see `Lock.ifHeld`). It touches `key` alone, so releases of other keys started in the same turn go
 * with it in one request (TxnBatcher). Safe to resend; true if it held.
 */
export async function leaveVersion(
  client: EtcdClient,
  key: string,
  modRevision: number,
  options: CallOptions = {},
): Promise<boolean> {
  const release = client
    .txn()
    .if(cmp.modRevision(key, "==", modRevision))
    .then(op.delete(key))
    .prepare();
  return (await release.commitWithOthers(key, options)).succeeded;
}
