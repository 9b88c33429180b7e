import type { KeyValue } from "../../api/codec.js";
import { wellFormedText } from "../../api/bytes.js";
import { randomHex } from "../../api/random.js";
import { describe, invalidArgument, lockNameConflict } from "../../errors/catalogue.js";
import { EtcdError } from "../../errors/etcd-error.js";

/**
 * The keys of a line (docs/protocol.md, "The line"). Every acquisition puts a key of its own under `<name>/`,
 * bound to its session's lease: `<leaseHex>_<16 hex>` (mutex, election, lockAll), `<leaseHex>-<16 hex>` (permit),
 * `read/` or `write/<leaseHex>-<16 hex>`. Go's `concurrency`, `etcdctl` and v3lock put `<leaseHex>` and order
 * contenders by create revision under the prefix, as we do, so they exclude one another. The random part (no
 * `/`: nested names stay apart) keeps two acquisitions of one lease apart, whatever their origin.
 *
 * A mutex reuses a key of its own once etcd confirmed its release deleted it and nothing of it is in flight (no
 * ticket out, no join unanswered): etcd keeps deleted keys in its index until a compaction and every read of a
 * line walks them, so a new key per acquisition slows a hot name at every handoff. Each acquisition's value is
 * drawn fresh (its secret): a join that finds its key there under another value, or there already at its first
 * send, takes a new key (`KeyTaken`): a sandbox restored from the same snapshot made it.
 */

/**
 * A join found its key there, not put by this acquisition (see the module's comment): an answer, so never sent
 * again (an EtcdError of a final code), and the mutex draws a new key.
 */
export class KeyTaken extends EtcdError {
  constructor(key: string) {
    super("ALREADY_EXISTS", `key ${key} is another acquisition's`);
  }
}

/** What can stand in a line: a mutex's is what Go's `concurrency` writes too. */
export type KeyKind = "mutex" | "permit" | "rw";

const MUTEX = /^[1-9a-f][0-9a-f]*(_[0-9a-f]{16})?$/;
const PERMIT = /^[1-9a-f][0-9a-f]*-[0-9a-f]{16}$/;
const RW = /^(read|write)\/[1-9a-f][0-9a-f]*-[0-9a-f]{16}$/;
const FORMATS: Record<KeyKind, RegExp> = { mutex: MUTEX, permit: PERMIT, rw: RW };

/** A new key for one acquisition (`sub`: `read/` or `write/` for a read-write lock; `random`: 16 hex, fresh). */
export function newKey(prefix: string, leaseId: string, kind: KeyKind, sub = "", random = randomHex(8)): string {
  return `${prefix}${sub}${leaseHex(leaseId)}${kind === "mutex" ? "_" : "-"}${random}`;
}

/**
 * LOCK_NAME_CONFLICT unless every key seen is a contender of this kind of line, bound to a lease. Any other key
 * (data stored under the lock's name, a lock named `<name>/x`, another recipe's key, a key a plain put cut loose
 * from its lease, a tool's stray key) sorts into the line like a contender and, with no lease or one that lives
 * on, would block it for good; every key that can reach the head of a line passes here before anyone waits
 * behind it. The reads it judges are never keys-only: etcd 3.7 leaves `lease` out of those (etcd-io/etcd#22209).
 */
export function contenders(kind: KeyKind, prefix: string, ...lists: (readonly KeyValue[])[]): void {
  for (const kvs of lists) {
    for (const kv of kvs) {
      const loose = kv.lease === "0";
      if (loose || !isKeyOf(kind, prefix, kv.key)) throw lockNameConflict(prefix.slice(0, -1), kv.key, loose);
    }
  }
}

/** Whether `key` has the form of a `kind` contender's key in the line under `prefix`. */
export function isKeyOf(kind: KeyKind, prefix: string, key: string): boolean {
  return key.startsWith(prefix) && FORMATS[kind].test(key.slice(prefix.length));
}

/** Keys the SDK keeps beside the lines (an operator's requests to holders): no line may be named under it. */
export const RESERVED_PREFIX = "__etcd-edge/";

/**
 * A lock, semaphore, election or read-write lock name, checked before anything is sent: a non-empty,
 * well-formed string, not under RESERVED_PREFIX. `what` names it in the error: "a lock", "an election".
 */
export function nameArg(name: unknown, what: string): string {
  if (typeof name !== "string" || name.length === 0) {
    throw invalidArgument(`${what} name must be a non-empty string, got ${describe(name)}`);
  }
  if (name.startsWith(RESERVED_PREFIX)) {
    throw invalidArgument(`${what} name must not start with "${RESERVED_PREFIX}" (the SDK's own keys), got "${name}"`);
  }
  return wellFormedText(name);
}

/** A lease ID (decimal) in lowercase hex, as Go's `concurrency` package names a contender's key. */
export function leaseHex(leaseId: string): string {
  return BigInt(leaseId).toString(16);
}
