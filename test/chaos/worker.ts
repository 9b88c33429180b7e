// One chaos worker process: fenced read-modify-writes of one counter under one lock, with the built
// package, forever until SIGTERM. Reports every step as a JSON line on stdout (see events.ts). A recipe
// worker (config.kind.recipe) runs recipe-worker.ts's round instead, with the same reporting.
//
// Usage: node test/chaos/worker.ts '<WorkerConfig JSON>'
import { writeSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Etcd as EtcdClient, Fetch, Lock, Session } from "../../src/index.js";
import type { CallEvent, WorkerConfig, WorkerEvent } from "./events.ts";
import { seeded } from "./random.ts";
import { recipeRound } from "./recipe-worker.ts";
import { sleep, wallNow } from "../support/time.ts";

type Sdk = typeof import("../../src/index.js");
type NodeEntry = typeof import("../../src/node/index.js");

// A call still pending this long after its own budget is reported and left behind, so one hung call is a
// finding, not a hung worker.
const ABANDON_AFTER_MS = 5_000;

const config = JSON.parse(process.argv[2] ?? "") as WorkerConfig & { id: string };
const sdk = (await import(pathToFileURL(join(config.sdk, "index.js")).href)) as Sdk;
const { cmp, op } = sdk;
const rng = seeded(config.seed);
const T = config.callTimeout;
const noop = () => {};

function emit(event: WorkerEvent): void {
  // Synchronous, one short line per write: a line written before a SIGKILL is never lost or torn.
  writeSync(1, `${JSON.stringify(event)}\n`);
}

let stopping = false;
process.on("SIGTERM", () => (stopping = true));

const baseFetch: Fetch =
  config.kind.fetch === "node"
    ? ((await import(pathToFileURL(join(config.sdk, "node.js")).href)) as NodeEntry).createNodeFetch()
    : (url, init) => globalThis.fetch(url, init);

/** The lease last granted: a worker's session or withLock uses one lease at a time, the newest. */
let activeLease: string | undefined;
const LOSSES = new Set(["SESSION_EXPIRED", "LOCK_LOST"]);

/** How a request of joins or releases sent together starts (the client's TxnBatcher). */
const BATCHED = '{"success":[{"request_txn":';

/**
 * The chosen fetch, reporting each lease the gateway grants us (withLock's lease is otherwise invisible) and
 * each request that carries joins or releases of several locks.
 */
const fetch: Fetch = async (url, init) => {
  if (init.body.startsWith(BATCHED)) emit({ ev: "sdk", t: wallNow(), type: "batch" });
  const response = await baseFetch(url, init);
  if (!url.endsWith("/v3/lease/grant") || response.status !== 200) return response;
  const text = await response.text();
  try {
    const id = (JSON.parse(text) as { ID?: string }).ID;
    if (id !== undefined) {
      activeLease = id;
      emit({ ev: "lease", t: wallNow(), leaseId: id });
    }
  } catch {
    // Not JSON: the SDK reports it.
  }
  return { status: response.status, body: null, text: async () => text };
};

/** The SDK's own account of sessions and endpoints, for the run record (see the "sdk" event). */
const SDK_EVENTS = new Set(["session.renewed", "session.renewFailed", "session.lost", "failover"]);
const onEvent = (event: { type: string; leaseId?: string; code?: string; from?: string; to?: string }) => {
  if (!SDK_EVENTS.has(event.type)) return;
  emit({
    ev: "sdk",
    t: wallNow(),
    type: event.type,
    leaseId: event.leaseId,
    code: event.code,
    from: event.from,
    to: event.to,
  });
};

const etcd: EtcdClient = new sdk.Etcd({ endpoints: config.endpoints, timeout: T, fetch, onEvent });
let session: Session | undefined;
let seq = 0;

/** Runs one SDK call, reporting how long it took against the most its own timeouts allow. */
async function call<R>(
  op: CallEvent["op"],
  budget: number,
  run: () => Promise<R>,
  late: (value: R) => void = noop,
): Promise<R> {
  const t0 = wallNow();
  const report = (ok: boolean, error?: unknown, abandoned?: boolean) =>
    emit({
      ev: "call",
      op,
      t0,
      t: wallNow(),
      budget,
      ok,
      code: error === undefined ? undefined : codeOf(error),
      message: error instanceof Error ? error.message.slice(0, 240) : undefined,
      abandoned,
    });
  let timer: ReturnType<typeof setTimeout> | undefined;
  let gaveUp = false;
  const pending = run();
  const abandon = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      gaveUp = true;
      reject(new Error(`${op} still pending ${ABANDON_AFTER_MS} ms past its ${budget} ms budget`));
    }, budget + ABANDON_AFTER_MS);
  });
  pending.then((value) => gaveUp && late(value), noop);
  try {
    const value = await Promise.race([pending, abandon]);
    report(true);
    return value;
  } catch (error) {
    report(false, error, gaveUp);
    const code = codeOf(error);
    if (LOSSES.has(code)) emit({ ev: "lost", t: wallNow(), op, code, leaseId: activeLease });
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

function codeOf(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" ? code : error instanceof Error ? error.name : "THROWN";
}

/** The work under the lock, bracketed by the events the judge times the line with. */
async function underLock(lock: Lock, waitStart: number): Promise<void> {
  emit({ ev: "acquired", t: wallNow(), key: lock.key, token: lock.revision, leaseId: lock.leaseId, waitStart });
  try {
    await fencedIncrement(lock);
  } finally {
    emit({ ev: "released", t: wallNow(), key: lock.key, token: lock.revision });
  }
}

/** Read the counter, hold a little, then write counter+1 and a log key in one txn fenced by the lock. */
async function fencedIncrement(lock: Lock): Promise<void> {
  const current = await call("get", T, () => etcd.get(config.counterKey, { timeout: T }));
  const value = current === undefined ? 0 : Number(current.value);
  const modRevision = current?.modRevision ?? 0;
  await sleep(rng.int(0, config.maxHold));
  const attempt = `${config.id}.${seq++}`;
  const logKey = `${config.logPrefix}${String(lock.revision).padStart(12, "0")}.${attempt}`;
  emit({ ev: "commit-sent", t: wallNow(), attempt, token: lock.revision, logKey, value: value + 1 });
  try {
    const result = await call("txn", T, () =>
      etcd
        .txn()
        .if(lock.ifHeld(), cmp.modRevision(config.counterKey, "==", modRevision))
        .then(
          op.put(config.counterKey, String(value + 1)),
          op.put(logKey, JSON.stringify({ token: lock.revision, value: value + 1, attempt })),
        )
        .else(op.get(lock.key), op.get(config.counterKey))
        .commit({ timeout: T }),
    );
    if (result.succeeded) {
      emit({ ev: "commit", t: wallNow(), attempt, outcome: "ok" });
    } else {
      const [own, counter] = result.responses as unknown as Array<{
        kvs: Array<{ createRevision: number; modRevision: number }>;
      }>;
      emit({
        ev: "commit",
        t: wallNow(),
        attempt,
        outcome: "refused",
        ownKeyHeld: own?.kvs[0]?.createRevision === lock.revision,
        counterMoved: (counter?.kvs[0]?.modRevision ?? 0) !== modRevision,
      });
    }
  } catch (error) {
    emit({ ev: "commit", t: wallNow(), attempt, outcome: "error", code: codeOf(error) });
  }
}

async function liveSession(keepAlive: "auto" | "manual"): Promise<Session> {
  if (session?.alive) return session;
  if (session !== undefined) {
    const dead = session;
    void call("close", T, () => dead.close({ timeout: T })).catch(noop);
  }
  session = await call("session", T, () => etcd.session({ ttl: config.ttl, keepAlive, timeout: T }));
  return session;
}

async function lockRound(current: Session): Promise<void> {
  const waitStart = wallNow();
  const lock = await call(
    "lock",
    config.lockTimeout,
    () =>
      current
        .mutex(config.name)
        .lock({ timeout: config.lockTimeout, wait: config.kind.wait, pollInterval: config.pollInterval }),
    (late) => void late.unlock({ timeout: T }).catch(noop),
  );
  try {
    await underLock(lock, waitStart);
  } finally {
    await release(lock);
  }
}

/** unlock(); one more try after a failure that is not final, as a careful caller would: the key must go. */
async function release(lock: Lock): Promise<void> {
  try {
    await call("unlock", T, () => lock.unlock({ timeout: T }));
  } catch (error) {
    if (codeOf(error) === "TIMEOUT" || codeOf(error) === "UNAVAILABLE") {
      await call("unlock", T, () => lock.unlock({ timeout: T })).catch(noop);
    }
  }
}

async function round(): Promise<void> {
  const { mode, wait } = config.kind;
  if (mode === "auto") return lockRound(await liveSession("auto"));
  if (mode === "manual") {
    const current = await liveSession("manual");
    return current.renewWhile(() => lockRound(current));
  }
  const waitStart = wallNow();
  // withLock: its own grant and revoke (T each), the wait (lockTimeout), and fn (get + txn + hold).
  const budget = config.lockTimeout + 4 * T + config.maxHold;
  await call("withLock", budget, () =>
    etcd.withLock(config.name, (lock) => underLock(lock, waitStart), {
      ttl: config.ttl,
      keepAlive: mode === "withlock-manual" ? "manual" : "auto",
      timeout: config.lockTimeout,
      wait,
      pollInterval: config.pollInterval,
    }),
  );
}

const { recipe } = config.kind;
const recipes = config.recipes;
if (recipe !== undefined && recipes === undefined) throw new Error(`a ${recipe} worker needs the recipes' names`);
const thisRound =
  recipe === undefined
    ? round
    : recipeRound(
        {
          sdk,
          etcd,
          config: { ...config, recipes: recipes! },
          rng,
          emit,
          call,
          liveSession,
          nextAttempt: () => `${config.id}.${seq++}`,
          codeOf,
        },
        recipe,
      );

emit({ ev: "ready", t: wallNow(), pid: process.pid });
while (!stopping) {
  try {
    await thisRound();
  } catch {
    // Reported by call(); a failed round is followed by a short pause, as a real client would back off.
    await sleep(rng.int(50, 250));
  }
  await sleep(rng.int(0, 20));
}
if (session?.alive) await call("close", T, () => session!.close({ timeout: T })).catch(noop);
emit({ ev: "exit", t: wallNow(), reason: "SIGTERM" });
process.exit(0);
