import type { EtcdClient } from "../../api/client.js";
import type { KeyValue, LeaseId, ResponseHeader } from "../../api/codec.js";
import { cmp, op } from "../../api/txn.js";
import { describe, invalidArgument } from "../../errors/catalogue.js";
import { isEtcdError } from "../../errors/etcd-error.js";
import type { CallOptions } from "../../gateway/transport.js";
import { lineView } from "./inspect.js";
import { nameArg } from "../line/keys.js";
import { encodeRequest, MAX_REASON, type RequestKind, requestKey } from "../line/requests.js";

/** What `operator.revokeLock` and `operator.requestRelease` take. */
export interface RevokeOptions extends CallOptions {
  /** Told to the holder: LOCK_LOST's message for a revocation, RELEASE_REQUESTED's for a request. */
  reason?: string | undefined;
  /**
   * The holding's key, as `inspectLock`, `inspectSemaphore` or `npx etcd-edge locks inspect` show it: one of
   * several holders (a semaphore's permits, a read-write lock's readers). Default: the oldest holding.
   */
  key?: string | undefined;
}

/** The holding a revocation ended or a request went to. */
export interface Revoked {
  /** Its key. */
  key: string;
  /** Its fencing token (its key's create revision): its fenced writes are refused from the revocation on. */
  token: number;
  /** Its session's lease, which lives on: only this holding ended. */
  leaseId: LeaseId;
  /** The reason told to the holder. */
  reason: string;
  /** The header of the transaction that revoked it or left the request. */
  header: ResponseHeader;
}

/**
 * Ends the holding of `name` (the oldest, or the one `options.key` names): deletes its key, guarded by its create
 * revision so that only that holding ends, and leaves the reason for its holder (line/requests.ts). Resolves with what
 * it revoked; undefined when nothing holds `name` (or `key`), or when the holding ended by itself meanwhile: a
 * revocation never reaches past the holding it found. Two requests.
 */
export function revokeLock(
  client: EtcdClient,
  name: string,
  options: RevokeOptions = {},
): Promise<Revoked | undefined> {
  return ask(client, name, "revoke", options);
}

/**
 * Asks the holder of `name` (the oldest, or `options.key`'s) to release it: its `releaseRequested` signal aborts
 * with the reason. Nothing else changes: the record lies outside the line, so every contender (Go's `Mutex`,
 * `etcdctl lock`, v3lock) sees the same line as before. Resolves with the holding asked, as `revokeLock`.
 */
export function requestRelease(
  client: EtcdClient,
  name: string,
  options: RevokeOptions = {},
): Promise<Revoked | undefined> {
  return ask(client, name, "release", options);
}

async function ask(
  client: EtcdClient,
  name: string,
  kind: RequestKind,
  options: RevokeOptions,
): Promise<Revoked | undefined> {
  nameArg(name, "a lock");
  const reason = reasonArg(options.reason);
  if (options.key !== undefined && typeof options.key !== "string") {
    throw invalidArgument(`key must be a holding's key (a string), got ${describe(options.key)}`);
  }
  const call = { signal: options.signal, timeout: options.timeout, attemptTimeout: options.attemptTimeout };
  const { kvs } = await client.range({
    prefix: `${name}/`,
    sort: { target: "createRevision", order: "ascend" },
    ...call,
  });
  const holders = lineView(name, kvs)?.holders ?? [];
  const holding = options.key === undefined ? holders[0] : holders.find((kv) => kv.key === options.key);
  if (holding === undefined) return undefined;
  const token = holding.createRevision;
  // Bound to the holding's lease: the record goes with its session, whoever holds next.
  const record = op.put(requestKey(holding.key), encodeRequest({ kind, token, reason }), { lease: holding.lease });
  try {
    const result = await client
      .txn()
      .if(cmp.createRevision(holding.key, "==", token))
      .then(...(kind === "revoke" ? [op.delete(holding.key), record] : [record]))
      .commit(call);
    return result.succeeded ? revoked(holding, reason, result.header) : undefined;
  } catch (error) {
    // Its lease ended after the read: so did the holding, by itself.
    if (isEtcdError(error, "LEASE_NOT_FOUND")) return undefined;
    throw error;
  }
}

function revoked(holding: KeyValue, reason: string, header: ResponseHeader): Revoked {
  return { key: holding.key, token: holding.createRevision, leaseId: holding.lease, reason, header };
}

function reasonArg(reason: unknown): string {
  if (reason === undefined) return "no reason was given";
  if (typeof reason !== "string" || reason.length === 0 || reason.length > MAX_REASON) {
    const got = typeof reason === "string" ? `a string of ${reason.length} characters` : describe(reason);
    throw invalidArgument(`reason must be a string of 1 to ${MAX_REASON} characters (a sentence for logs), got ${got}`);
  }
  return reason;
}
