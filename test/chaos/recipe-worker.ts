// One round of a recipe worker (events.ts `Recipe`), run by worker.ts in place of the mutex round: take a
// permit, a read or write lock, several locks at once or one of the shared names, do the fenced work the
// judge can check (recipe-checks.ts), release. Every step is reported as the mutex worker reports its own.
import type { Compare, Etcd as EtcdClient, Lock, ResponseHeader, Session } from "../../src/index.js";
import type { CallEvent, FencedWrite, Guarded, Recipe, RecipeNames, WorkerConfig, WorkerEvent } from "./events.ts";
import type { Random } from "./random.ts";
import { sleep, wallNow } from "../support/time.ts";

type Sdk = typeof import("../../src/index.js");

/** What worker.ts lends a recipe round: its client, reporting and session handling. */
export interface RecipeContext {
  sdk: Sdk;
  etcd: EtcdClient;
  config: WorkerConfig & { id: string; recipes: RecipeNames };
  rng: Random;
  emit(event: WorkerEvent): void;
  call<R>(op: CallEvent["op"], budget: number, run: () => Promise<R>, late?: (value: R) => void): Promise<R>;
  liveSession(keepAlive: "auto" | "manual"): Promise<Session>;
  /** A fresh attempt id, `<worker>.<n>`. */
  nextAttempt(): string;
  codeOf(error: unknown): string;
}

/** What every recipe holding offers the round: its keys, its token, its compares, its release. */
interface Holding {
  keys: readonly string[];
  names: readonly string[];
  revision: number;
  leaseId: string;
  header: ResponseHeader;
  ifHeld(): Compare[];
}

const noop = () => {};

export function recipeRound(ctx: RecipeContext, recipe: Recipe): () => Promise<void> {
  const { sdk, etcd, config, rng, emit, call } = ctx;
  const { cmp, op } = sdk;
  const T = config.callTimeout;
  const { semaphore, rwlock, names } = config.recipes;
  const waitOptions = { timeout: config.lockTimeout, wait: config.kind.wait, pollInterval: config.pollInterval };
  const oneShot = config.kind.mode === "withlock-auto" || config.kind.mode === "withlock-manual";
  const withOptions = {
    ...waitOptions,
    ttl: config.ttl,
    keepAlive: config.kind.mode === "withlock-manual" ? ("manual" as const) : ("auto" as const),
  };
  // withSemaphore / withLocks / withLock: grant or reuse the lease, the wait, fn (get, txn, hold), the release.
  const oneShotBudget = config.lockTimeout + 4 * T + config.maxHold;

  /** The work under a holding, bracketed by the events the judge times and places it with. */
  async function under(h: Holding, waitStart: number, recipeOf: Recipe, work: () => Promise<void>): Promise<void> {
    acquired(h, waitStart, recipeOf);
    try {
      await work();
    } finally {
      released(h);
    }
  }

  function acquired(h: Holding, waitStart: number, recipeOf: Recipe): void {
    emit({
      ev: "acquired",
      t: wallNow(),
      key: h.keys[0]!,
      token: h.revision,
      leaseId: h.leaseId,
      waitStart,
      recipe: recipeOf,
      keys: [...h.keys],
      names: [...h.names],
      at: h.header.revision,
    });
  }

  function released(h: Holding): void {
    emit({ ev: "released", t: wallNow(), key: h.keys[0]!, token: h.revision });
  }

  /**
   * Read every counter, hold a little, then write each counter + 1 and a log key per counter in one txn fenced
   * by the holding and by each counter's mod revision (a CAS: a semaphore's holders race for the counter, so
   * theirs may be refused with the permit still held; for the other recipes that means two holders at once).
   */
  async function fencedIncrement(h: Holding, guarded: readonly Guarded[]): Promise<void> {
    const read = await call("get", T, () =>
      etcd
        .txn()
        .then(...guarded.map((g) => op.get(g.counterKey)))
        .commit({ timeout: T }),
    );
    const seen = (read.responses as unknown as Array<{ kvs: Array<{ value: string; modRevision: number }> }>).map(
      (r) => ({
        value: r.kvs[0] === undefined ? 0 : Number(r.kvs[0].value),
        modRevision: r.kvs[0]?.modRevision ?? 0,
      }),
    );
    await sleep(rng.int(0, config.maxHold));
    const attempt = ctx.nextAttempt();
    const writes: FencedWrite[] = guarded.map((g, i) => ({
      counterKey: g.counterKey,
      logKey: `${g.logPrefix}${String(h.revision).padStart(12, "0")}.${attempt}`,
      value: seen[i]!.value + 1,
    }));
    emit({ ev: "fenced-sent", t: wallNow(), attempt, token: h.revision, writes });
    try {
      const result = await call("txn", T, () =>
        etcd
          .txn()
          .if(...h.ifHeld(), ...guarded.map((g, i) => cmp.modRevision(g.counterKey, "==", seen[i]!.modRevision)))
          .then(
            ...writes.flatMap((w) => [
              op.put(w.counterKey, String(w.value)),
              op.put(w.logKey, JSON.stringify({ token: h.revision, value: w.value, attempt })),
            ]),
          )
          .else(...h.keys.map((key) => op.get(key)), ...guarded.map((g) => op.get(g.counterKey)))
          .commit({ timeout: T }),
      );
      if (result.succeeded) return emit({ ev: "commit", t: wallNow(), attempt, outcome: "ok" });
      const found = result.responses as unknown as Array<{
        kvs: Array<{ createRevision: number; modRevision: number }>;
      }>;
      const own = found.slice(0, h.keys.length);
      const counters = found.slice(h.keys.length);
      emit({
        ev: "commit",
        t: wallNow(),
        attempt,
        outcome: "refused",
        ownKeyHeld: own.every((r) => r.kvs[0]?.createRevision === h.revision),
        counterMoved: counters.some((r, i) => (r.kvs[0]?.modRevision ?? 0) !== seen[i]!.modRevision),
      });
    } catch (error) {
      emit({ ev: "commit", t: wallNow(), attempt, outcome: "error", code: ctx.codeOf(error) });
    }
  }

  /** Two fenced reads of the rw-protected counter with a pause between: no write may land between them. */
  async function fencedReads(h: Holding): Promise<void> {
    for (let pass = 0; pass < 2; pass++) {
      if (pass > 0) await sleep(rng.int(0, config.maxHold));
      const base = { ev: "read" as const, key: h.keys[0]!, token: h.revision, pass };
      try {
        const result = await call("read", T, () =>
          etcd
            .txn()
            .if(...h.ifHeld())
            .then(op.get(rwlock.counterKey))
            .commit({ timeout: T }),
        );
        if (!result.succeeded) {
          emit({ ...base, t: wallNow(), outcome: "refused" });
          return;
        }
        const [counter] = result.responses as unknown as Array<{ kvs: Array<{ modRevision: number }> }>;
        emit({
          ...base,
          t: wallNow(),
          outcome: "ok",
          revision: result.header.revision,
          modRevision: counter?.kvs[0]?.modRevision ?? 0,
        });
      } catch (error) {
        emit({ ...base, t: wallNow(), outcome: "error", code: ctx.codeOf(error) });
        return;
      }
    }
  }

  /** unlock()/release(); one more try after a failure that is not final, as worker.ts's release. */
  async function release(
    op: "unlock" | "release",
    end: (options: { timeout: number }) => Promise<void>,
  ): Promise<void> {
    try {
      await call(op, T, () => end({ timeout: T }));
    } catch (error) {
      const code = ctx.codeOf(error);
      if (code === "TIMEOUT" || code === "UNAVAILABLE") await call(op, T, () => end({ timeout: T })).catch(noop);
    }
  }

  const single = <
    H extends {
      key: string;
      name: string;
      revision: number;
      leaseId: string;
      header: ResponseHeader;
      ifHeld(): Compare;
    },
  >(
    held: H,
  ): Holding => ({
    keys: [held.key],
    names: [held.name],
    revision: held.revision,
    leaseId: held.leaseId,
    header: held.header,
    ifHeld: () => [held.ifHeld()],
  });

  /** A round on a long-lived session: inside renewWhile for a manual one, as the mutex worker does. */
  async function onSession(round: (session: Session) => Promise<void>): Promise<void> {
    if (config.kind.mode === "manual") {
      const session = await ctx.liveSession("manual");
      return session.renewWhile(() => round(session));
    }
    return round(await ctx.liveSession("auto"));
  }

  /** Tells the judge what comes next, then starts timing the wait. */
  const asking = (names: readonly string[]): number => {
    emit({ ev: "asking", t: wallNow(), recipe, names: [...names] });
    return wallNow();
  };

  /** 2 or 3 of the shared names, in a random order: lockAll must not care. */
  const someNames = () => rng.shuffle(names).slice(0, rng.int(2, Math.min(3, names.length)));

  switch (recipe) {
    case "semaphore": {
      const work = (h: Holding) => fencedIncrement(h, [semaphore]);
      if (oneShot) {
        return async () => {
          const waitStart = asking([semaphore.name]);
          await call("withSemaphore", oneShotBudget, () =>
            etcd.withSemaphore(
              semaphore.name,
              semaphore.permits,
              (permit) => under(single(permit), waitStart, recipe, () => work(single(permit))),
              withOptions,
            ),
          );
        };
      }
      return () =>
        onSession(async (session) => {
          const waitStart = asking([semaphore.name]);
          const permit = await call(
            "acquire",
            config.lockTimeout,
            () => session.semaphore(semaphore.name, { permits: semaphore.permits }).acquire(waitOptions),
            (late) => void late.release({ timeout: T }).catch(noop),
          );
          try {
            await under(single(permit), waitStart, recipe, () => work(single(permit)));
          } finally {
            await release("release", (o) => permit.release(o));
          }
        });
    }
    case "reader":
    case "writer":
      return () =>
        onSession(async (session) => {
          const waitStart = asking([rwlock.name]);
          const rw = session.rwlock(rwlock.name);
          const held =
            recipe === "reader"
              ? await call(
                  "readLock",
                  config.lockTimeout,
                  () => rw.readLock(waitOptions),
                  (late) => void late.unlock({ timeout: T }).catch(noop),
                )
              : await call(
                  "writeLock",
                  config.lockTimeout,
                  () => rw.writeLock(waitOptions),
                  (late) => void late.unlock({ timeout: T }).catch(noop),
                );
          const h = single(held);
          try {
            await under(h, waitStart, recipe, () =>
              recipe === "reader" ? fencedReads(h) : fencedIncrement(h, [rwlock]),
            );
          } finally {
            await release("unlock", (o) => held.unlock(o));
          }
        });
    case "lock-all": {
      const multi = (m: Holding): Holding => m;
      const guardedOf = (chosen: readonly string[]) => chosen.map((name) => names.find((n) => n.name === name)!);
      if (oneShot) {
        return async () => {
          const chosen = someNames().map((n) => n.name);
          const waitStart = asking(chosen);
          await call("withLocks", oneShotBudget, () =>
            etcd.withLocks(
              chosen,
              (locks) =>
                under(multi(locks), waitStart, recipe, () => fencedIncrement(multi(locks), guardedOf(locks.names))),
              withOptions,
            ),
          );
        };
      }
      return () =>
        onSession(async (session) => {
          const chosen = someNames().map((n) => n.name);
          const waitStart = asking(chosen);
          const locks = await call(
            "lockAll",
            config.lockTimeout,
            () => session.lockAll(chosen, waitOptions),
            (late) => void late.unlock({ timeout: T }).catch(noop),
          );
          try {
            await under(multi(locks), waitStart, recipe, () => fencedIncrement(multi(locks), guardedOf(locks.names)));
          } finally {
            await release("unlock", (o) => locks.unlock(o));
          }
        });
    }
    case "name-pair": {
      if (oneShot) throw new Error("a name-pair worker runs on a session");
      // Two of the shared names as two mutexes of one session, asked for in the same turn: their joins (and
      // later their releases) go to etcd as one request (the client's TxnBatcher), so both keys usually share
      // one create revision. Each lock is reported acquired as it resolves (the judge times each line's wait),
      // is a plain mutex holding of its name, and fences its own write. Two pairs whose joins went apart may
      // wait for each other in opposite orders until one times out, which only costs time.
      return () =>
        onSession(async (session) => {
          const chosen = rng.shuffle(names).slice(0, 2);
          const waitStart = asking(chosen.map((n) => n.name));
          const taken: Array<{ lock: Lock; h: Holding; guarded: Guarded }> = [];
          const asked = chosen.map((n) =>
            session
              .mutex(n.name)
              .lock(waitOptions)
              .then((lock) => {
                const h = single(lock);
                acquired(h, waitStart, "name-mutex");
                taken.push({ lock, h, guarded: n });
              }),
          );
          const unlockAll = () => void Promise.all(taken.map((t) => t.lock.unlock({ timeout: T }).catch(noop)));
          try {
            await call(
              "lock",
              config.lockTimeout,
              async () => {
                const failed = (await Promise.allSettled(asked)).find((r) => r.status === "rejected");
                if (failed !== undefined) throw failed.reason;
              },
              unlockAll,
            );
            for (const t of taken) await fencedIncrement(t.h, [t.guarded]);
          } finally {
            for (const t of taken) released(t.h);
            await Promise.all(taken.map((t) => release("unlock", (o) => t.lock.unlock(o))));
          }
        });
    }
    case "name-mutex": {
      if (oneShot) {
        return async () => {
          const name = rng.pick(names);
          const waitStart = asking([name.name]);
          await call("withLock", oneShotBudget, () =>
            etcd.withLock(
              name.name,
              (lock) => under(single(lock), waitStart, recipe, () => fencedIncrement(single(lock), [name])),
              withOptions,
            ),
          );
        };
      }
      return () =>
        onSession(async (session) => {
          const name = rng.pick(names);
          const waitStart = asking([name.name]);
          const lock = await call(
            "lock",
            config.lockTimeout,
            () => session.mutex(name.name).lock(waitOptions),
            (late) => void late.unlock({ timeout: T }).catch(noop),
          );
          try {
            await under(single(lock), waitStart, recipe, () => fencedIncrement(single(lock), [name]));
          } finally {
            await release("unlock", (o) => lock.unlock(o));
          }
        });
    }
  }
}
