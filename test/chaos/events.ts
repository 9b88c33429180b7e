// What a chaos worker reports, one JSON line per event on stdout, and how workers are configured.
// Times are epoch milliseconds with sub-millisecond resolution (performance.timeOrigin + performance.now()),
// comparable across the processes of one machine.

/** How a worker takes the lock. */
export type WorkerMode =
  /** A long-lived session renewed by the SDK's timer; lock(), fenced write, unlock(). */
  | "auto"
  /** A long-lived manual session; each round runs inside session.renewWhile(). */
  | "manual"
  /** etcd.withLock() per round (a lease per round), auto keepalive. */
  | "withlock-auto"
  /** etcd.withLock() per round, manual keepalive (the README's first example). */
  | "withlock-manual";

export interface WorkerKind {
  mode: WorkerMode;
  wait: "watch" | "poll";
  /** The runtime's global fetch, or etcd-edge/node's pooled undici fetch. */
  fetch: "global" | "node";
  /**
   * Absent: the mutex worker. Else the recipe it exercises (recipe-worker.ts); its `with…` modes are
   * withSemaphore, withLocks, withLock.
   */
  recipe?: Recipe | undefined;
}

/**
 * The recipes' workers: a permit holder of the semaphore, a reader or a writer of the read-write lock, a
 * lockAll holder of 2–3 of the shared names, a plain mutex holder of one of those names, a holder of two of
 * those names as two mutexes of one session asked for in the same turn (their joins and releases share requests).
 */
export type Recipe = "semaphore" | "reader" | "writer" | "lock-all" | "name-mutex" | "name-pair";

/** The mix, dealt out to workers in this order. */
export const WORKER_KINDS: readonly WorkerKind[] = [
  { mode: "auto", wait: "watch", fetch: "global" },
  { mode: "manual", wait: "poll", fetch: "global" },
  { mode: "withlock-auto", wait: "watch", fetch: "node" },
  { mode: "auto", wait: "poll", fetch: "node" },
  { mode: "manual", wait: "watch", fetch: "node" },
  { mode: "withlock-manual", wait: "watch", fetch: "global" },
  { mode: "withlock-auto", wait: "poll", fetch: "global" },
  { mode: "auto", wait: "watch", fetch: "node" },
];

/**
 * The recipe workers, dealt after the mutex workers: permits + 1 semaphore holders (so one always waits),
 * two readers and two writers, two lockAll holders, a plain mutex holder (withLock) and a pair holder (two
 * mutexes of one session at once) of the shared names.
 */
export function recipeKinds(permits: number): WorkerKind[] {
  const semaphore: WorkerKind[] = [
    { mode: "auto", wait: "watch", fetch: "global", recipe: "semaphore" },
    { mode: "manual", wait: "poll", fetch: "node", recipe: "semaphore" },
    { mode: "withlock-auto", wait: "watch", fetch: "node", recipe: "semaphore" },
    { mode: "withlock-manual", wait: "poll", fetch: "global", recipe: "semaphore" },
  ];
  return [
    ...semaphore.slice(0, permits + 1),
    { mode: "auto", wait: "watch", fetch: "node", recipe: "reader" },
    { mode: "manual", wait: "poll", fetch: "global", recipe: "reader" },
    { mode: "auto", wait: "poll", fetch: "global", recipe: "writer" },
    { mode: "manual", wait: "watch", fetch: "node", recipe: "writer" },
    { mode: "auto", wait: "watch", fetch: "global", recipe: "lock-all" },
    { mode: "withlock-manual", wait: "poll", fetch: "node", recipe: "lock-all" },
    { mode: "manual", wait: "watch", fetch: "global", recipe: "name-pair" },
    { mode: "withlock-auto", wait: "poll", fetch: "global", recipe: "name-mutex" },
  ];
}

/** A counter written only by fenced read-modify-writes, each also writing a log key of its own. */
export interface Guarded {
  counterKey: string;
  logPrefix: string;
}

/** The recipes' names and the resources each protects. */
export interface RecipeNames {
  semaphore: Guarded & { name: string; permits: number };
  rwlock: Guarded & { name: string };
  /** Each name's counter is written by its plain mutex holders and by every lockAll holding it. */
  names: Array<Guarded & { name: string }>;
}

export interface WorkerConfig {
  /** Directory holding the built package's index.js and node.js. */
  sdk: string;
  endpoints: string[];
  /** The lock name; keys live under `${name}/`. */
  name: string;
  counterKey: string;
  logPrefix: string;
  kind: WorkerKind;
  /** Session lease TTL in seconds. */
  ttl: number;
  /** Per-call timeout of the client (ms). */
  callTimeout: number;
  /** lock() wait timeout (ms). */
  lockTimeout: number;
  pollInterval: number;
  /** Longest hold between reading the counter and the fenced write (ms). */
  maxHold: number;
  seed: number;
  /** What the recipe workers lock and write (set when the run has recipe workers). */
  recipes?: RecipeNames | undefined;
}

/** A settled SDK call, or one still pending long past its budget. */
export interface CallEvent {
  ev: "call";
  op:
    | "session"
    | "lock"
    | "get"
    | "txn"
    | "unlock"
    | "close"
    | "withLock"
    | "acquire"
    | "release"
    | "readLock"
    | "writeLock"
    | "lockAll"
    | "read"
    | "withSemaphore"
    | "withLocks";
  t0: number;
  t: number;
  /** The most this call may take by its own timeouts (ms). */
  budget: number;
  ok: boolean;
  code?: string | undefined;
  message?: string | undefined;
  /** The worker stopped waiting for it (it had not settled by budget + the abandon margin). */
  abandoned?: boolean | undefined;
}

export type WorkerEvent =
  | { ev: "ready"; t: number; pid: number }
  /** A lease granted to this worker (seen in the gateway's answer), so its keys can be attributed. */
  | { ev: "lease"; t: number; leaseId: string }
  | CallEvent
  /**
   * lock() resolved (or withLock's fn started): `token` is lock.revision. `waitStart`: when lock() was called.
   * A recipe worker adds what it holds (`keys`: every key of a lockAll, `key` being the first; `names`: the
   * lock names) and `at`, the revision of the response that showed it acquired (the holding's `header`).
   */
  | {
      ev: "acquired";
      t: number;
      key: string;
      token: number;
      leaseId: string;
      waitStart: number;
      recipe?: Recipe | undefined;
      keys?: string[] | undefined;
      names?: string[] | undefined;
      at?: number | undefined;
    }
  /** Done with the lock (just before unlock(), or as withLock's fn returns): from now on it is free for others. */
  | { ev: "released"; t: number; key: string; token: number }
  /** About to send the fenced txn for `attempt`, which writes `logKey` with counter `value`. */
  | { ev: "commit-sent"; t: number; attempt: string; token: number; logKey: string; value: number }
  /**
   * A recipe worker about to ask for `names` (full lock names; the semaphore's or the read-write lock's own
   * name for those): a key of its lease put in another line afterwards was not asked for (recipe-checks.ts).
   */
  | { ev: "asking"; t: number; recipe: Recipe; names: string[] }
  /** A recipe worker about to send the fenced txn for `attempt`: one counter write and one log key per counter. */
  | { ev: "fenced-sent"; t: number; attempt: string; token: number; writes: FencedWrite[] }
  /**
   * A reader's fenced read of the read-write lock's counter, `txn().if(read.ifHeld()).then(get counter)`:
   * `outcome` ok with the txn's revision and the counter's mod revision seen, refused (the read lock was
   * gone), or error. Each hold reads twice, `pass` 0 and 1, with a pause between.
   */
  | {
      ev: "read";
      t: number;
      key: string;
      token: number;
      pass: number;
      outcome: "ok" | "refused" | "error";
      revision?: number | undefined;
      modRevision?: number | undefined;
      code?: string | undefined;
    }
  | {
      ev: "commit";
      t: number;
      attempt: string;
      outcome: "ok" | "refused" | "error";
      code?: string | undefined;
      /**
       * For a refused commit: whether our own lock key was still there with our token (the else branch's
       * read; for a lockAll, every one of its keys).
       */
      ownKeyHeld?: boolean | undefined;
      /** For a refused commit: whether the counter (for a lockAll, any of its counters) had moved since it was read. */
      counterMoved?: boolean | undefined;
    }
  /**
   * A call said the session or the lock is gone (SESSION_EXPIRED, LOCK_LOST). `leaseId`: the lease last
   * granted to this worker, the one its session or withLock was using.
   */
  | { ev: "lost"; t: number; op: CallEvent["op"]; code: string; leaseId: string | undefined }
  /**
   * What the SDK reported through `onEvent` about sessions and endpoints (renewals, failed renewals, losses,
   * failovers), to tell afterwards why a session was lost. Not read by the checks.
   */
  | {
      ev: "sdk";
      t: number;
      type: string;
      leaseId?: string | undefined;
      code?: string | undefined;
      from?: string | undefined;
      to?: string | undefined;
    }
  | { ev: "exit"; t: number; reason: string };

/** One counter write of a recipe's fenced txn: `counterKey` set to `value`, and `logKey` put beside it. */
export interface FencedWrite {
  counterKey: string;
  logKey: string;
  value: number;
}
