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
}

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
}

/** A settled SDK call, or one still pending long past its budget. */
export interface CallEvent {
  ev: "call";
  op: "session" | "lock" | "get" | "txn" | "unlock" | "close" | "withLock";
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
  /** lock() resolved (or withLock's fn started): `token` is lock.revision. `waitStart`: when lock() was called. */
  | { ev: "acquired"; t: number; key: string; token: number; leaseId: string; waitStart: number }
  /** Done with the lock (just before unlock(), or as withLock's fn returns): from now on it is free for others. */
  | { ev: "released"; t: number; key: string; token: number }
  /** About to send the fenced txn for `attempt`, which writes `logKey` with counter `value`. */
  | { ev: "commit-sent"; t: number; attempt: string; token: number; logKey: string; value: number }
  | {
      ev: "commit";
      t: number;
      attempt: string;
      outcome: "ok" | "refused" | "error";
      code?: string | undefined;
      /** For a refused commit: whether our own lock key was still there with our token (the else branch's read). */
      ownKeyHeld?: boolean | undefined;
      counterMoved?: boolean | undefined;
    }
  /**
   * A call said the session or the lock is gone (SESSION_EXPIRED, LOCK_LOST). `leaseId`: the lease last
   * granted to this worker, the one its session or withLock was using.
   */
  | { ev: "lost"; t: number; op: CallEvent["op"]; code: string; leaseId: string | undefined }
  | { ev: "exit"; t: number; reason: string };
