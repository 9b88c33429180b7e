// The world a model-based run of the locks acts on (test/conformance/conformance-model.test.ts): clients whose
// fetch can lose answers and go down, the sessions and handles the run made, what was done to etcd from outside,
// and the oracle that reads etcd after every step and says what must hold. Public API only, so the same run
// can drive an earlier build.
import {
  type Election,
  type Etcd,
  type EtcdError,
  type Fetch,
  isEtcdError,
  type KeyValue,
  type Lock,
  type MultiLock,
  type op,
  type Permit,
  type ReadLock,
  type Session,
  type WriteLock,
} from "../../src/index.js";

/** A fetch that can lose the answers of chosen requests (applied, then the network fails) and go down. */
export type FaultyFetch = Fetch & {
  /** Paths whose next answers are lost, with how many. */
  lose: Map<string, number>;
  /** Until when (performance.now()) every request fails before it reaches etcd. */
  downUntil: number;
};

export function faultyFetch(inner: Fetch): FaultyFetch {
  const fetch = (async (input, init) => {
    if (performance.now() < fetch.downUntil) {
      throw new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED") });
    }
    const path = new URL(input).pathname;
    const left = fetch.lose.get(path) ?? 0;
    const response = await inner(input, init);
    if (left === 0) return response;
    fetch.lose.set(path, left - 1);
    await response.text();
    throw new TypeError("fetch failed", { cause: new Error("socket hang up") });
  }) as FaultyFetch;
  fetch.lose = new Map();
  fetch.downUntil = 0;
  return fetch;
}

/** The kinds of names a run uses: a mutex's line (mutexes, elections, lockAll), a semaphore's, a rwlock's. */
export type NameKind = "mutex" | "permit" | "rw";
export const PERMITS = 2;

export type Holding = Lock<Session> | Permit<Session> | ReadLock<Session> | WriteLock<Session> | MultiLock<Session>;

/** A handle the run got: a holding, or an election (its leadership). */
export interface Handle {
  id: number;
  kind: "lock" | "permit" | "read" | "write" | "locks" | "leadership";
  names: string[];
  holding?: Holding | undefined;
  election?: Election<Session> | undefined;
  session: Session;
  keys: string[];
  leaseId: string;
  revision: number;
  acquiredAt: number;
  /** The run released it (or tried to), or closed its session. */
  released: boolean;
  /** Its session was closed while it held, or while its unanswered release went on: a key a put cut loose may stay. */
  closedUnder: boolean;
  /** Its release failed unanswered (not lost, not released): the release goes on in the background. */
  releasing?: boolean | undefined;
  /** When the oracle first saw its key gone or not its own while it said held. */
  goneSince?: number | undefined;
}

export function held(handle: Handle): boolean {
  return handle.election ? handle.election.isLeader : (handle.holding?.held ?? false);
}

/**
 * What was done to etcd from outside the SDK, by key and by lease: the only ways a held key may go. A cause on a
 * key may be for the handles of one lease only (a takeover moves the key away from its sender alone).
 */
export class Causes {
  readonly #keys = new Map<string, Array<{ what: string; lease: string | undefined }>>();
  readonly leases = new Set<string>();

  key(key: string, what: string, lease?: string): void {
    this.#keys.set(key, [...(this.#keys.get(key) ?? []), { what, lease }]);
  }

  /** Why the key of a handle on `lease` may have gone. */
  of(key: string, lease: string): string[] {
    const found = (this.#keys.get(key) ?? []).filter((c) => c.lease === undefined || c.lease === lease);
    return [...found.map((c) => c.what), ...(this.leases.has(lease) ? ["revoked"] : [])];
  }
}

/** How long a holding of an auto session may say held after its key went: FOLLOW_AFTER, one event, a read. */
export const FOLLOW_WINDOW_MS = 1_000 + 2_500;

/** The value every write from outside puts: no handle ever writes it, so a key holding it is not a handle's. */
export const OUTSIDE = "outside";

/**
 * The oracle after a step: reads every key of the run and checks each handle that says held against it.
 * Returns the violations found (empty when all holds).
 */
export async function check(raw: Etcd, root: string, handles: readonly Handle[], causes: Causes): Promise<string[]> {
  const { kvs, header } = await raw.range({ prefix: root });
  const byKey = new Map(kvs.map((kv) => [kv.key, kv]));
  const line = (name: string) => kvs.filter((kv) => kv.key.startsWith(`${name}/`));
  const problems: string[] = [];
  const now = performance.now();
  for (const handle of handles) {
    // A background acquisition may land after the read: etcd's view of it comes with the next step's.
    if (!held(handle) || handle.revision > header.revision) continue;
    const where = `handle ${handle.id} (${handle.kind} ${handle.names.join(",")}, key ${handle.keys.join(",")})`;
    for (const key of handle.keys) {
      const kv = byKey.get(key);
      const ours =
        kv !== undefined &&
        kv.createRevision === handle.revision &&
        kv.lease === handle.leaseId &&
        kv.value !== OUTSIDE;
      if (!ours) {
        if (causes.of(key, handle.leaseId).length === 0) {
          const found = kv === undefined ? "absent" : `created at ${kv.createRevision} on lease ${kv.lease}`;
          const own = `created at ${handle.revision} on lease ${handle.leaseId}`;
          problems.push(`${where} says held, but its key went without any outside cause (${found}, not ${own})`);
        }
        handle.goneSince ??= now;
        const following = handle.session.keepAlive === "auto";
        const since = Math.max(handle.goneSince, handle.acquiredAt + 1_000);
        if (following && now - since > FOLLOW_WINDOW_MS) {
          problems.push(`${where} still says held ${Math.round(now - handle.goneSince)} ms after its key went`);
        }
        continue;
      }
      const name = handle.names.find((n) => key.startsWith(`${n}/`))!;
      const older = line(name).filter((other) => other.createRevision < kv.createRevision);
      if (handle.kind === "permit") {
        if (older.length >= PERMITS) problems.push(`${where} says held with ${older.length} keys ahead of it`);
      } else if (handle.kind === "read") {
        if (older.some((o) => o.key.startsWith(`${name}/write/`))) problems.push(`${where} reads behind a writer`);
      } else if (older.length > 0) {
        problems.push(`${where} says held behind ${older.map((o) => o.key).join(", ")}`);
      }
    }
  }
  return problems;
}

/**
 * Fenced writes of every held handle of a mutex line: at most one lands. Each through `rawFor(handle)`: a client
 * of the copy of the SDK that made the handle (a restored sandbox's has its own), whose compares it takes.
 */
export async function fencedWrites(
  rawFor: (handle: Handle) => { etcd: Etcd; op: typeof op },
  name: string,
  handles: readonly Handle[],
): Promise<string[]> {
  const holders = handles.filter((h) => h.names.includes(name) && h.kind !== "permit" && h.kind !== "read" && held(h));
  let landed = 0;
  for (const handle of holders) {
    const compare = handle.election
      ? handle.election.ifLeader()
      : [(handle.holding as { ifHeld(): unknown }).ifHeld()].flat();
    const raw = rawFor(handle);
    const result = await raw.etcd
      .txn()
      .if(...([compare].flat() as Parameters<ReturnType<Etcd["txn"]>["if"]>))
      .then(raw.op.put(`${name}-data`, String(handle.id)))
      .commit();
    if (result.succeeded) landed++;
  }
  return landed > 1 ? [`${landed} fenced writes on ${name} landed, from ${holders.length} handles that said held`] : [];
}

/** An error must never carry a secret, must be one of the SDK's, and of a code the call may end with. */
export function errorProblems(
  error: unknown,
  secrets: ReadonlySet<string>,
  what: string,
  allowed?: ReadonlySet<string>,
): string[] {
  if (!isEtcdError(error)) return [`${what} threw something that is not an EtcdError: ${String(error)}`];
  const text = `${error.message} ${JSON.stringify(error)} ${String((error as EtcdError).cause ?? "")}`;
  const problems = [...secrets]
    .filter((secret) => text.includes(secret))
    .map(() => `${what}: ${error.code} carries a secret`);
  if (allowed !== undefined && !allowed.has(error.code))
    problems.push(`${what} ended with ${error.code}: ${error.message}`);
  return problems;
}

/**
 * A LOCK_LOST that names a key (deleted, overwritten, made again, taken over) must have a cause on that key from
 * outside the SDK: the SDK never deletes or writes another acquisition's key, nor its own while it holds it.
 */
export function lossProblems(error: unknown, causes: Causes, lease: string, what: string): string[] {
  if (!isEtcdError(error, "LOCK_LOST")) return [];
  const key = /\bkey (\S+) (?:was|is)\b/.exec(error.message)?.[1];
  if (key === undefined || causes.of(key, lease).length > 0) return [];
  return [`${what}: ${error.message}, but nothing outside touched ${key}`];
}

/**
 * Keys left under the run's root once everything ended, besides the fenced writes' data, the run's own stray keys,
 * keys a put cut loose from their lease while their session was closed under them (nothing of the SDK could see
 * that put), and keys an outside put made anew (version 1) where a holding's key had already gone: they are the
 * outsider's, and the SDK never deletes another client's key.
 */
export function leftovers(
  kvs: readonly KeyValue[],
  handles: readonly Handle[],
  strays: ReadonlySet<string> = new Set(),
): KeyValue[] {
  const cutLoose = new Set(handles.filter((h) => h.closedUnder).flatMap((h) => h.keys));
  return kvs.filter(
    (kv) =>
      !kv.key.endsWith("-data") &&
      !strays.has(kv.key) &&
      !(kv.lease === "0" && cutLoose.has(kv.key)) &&
      !(kv.value === OUTSIDE && kv.version === 1),
  );
}
