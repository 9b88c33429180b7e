// The recipes' judge: pure functions from a run record to pass/fail checks, as checks.ts is for the mutex.
//
// Who may hold what is judged by revisions, never by clocks: a recipe's line is its keys ordered by create
// revision, and the store alone decides who is entitled. At revision r a key with create revision t is
// entitled when fewer than `limit` keys of its line older than t are alive (a semaphore: `permits`; a read
// lock: no older writer; a write lock and each name shared by lockAll and mutex holders: no older key).
// Older keys only ever leave, so once entitled a key stays so while it lives. The monitor's events give the
// line at every revision; the workers report the revision that showed them acquired (the holding's header),
// and the judge reads each fenced commit's revision from its log key and each fenced read's from its answer.
import {
  type Attempt,
  type CheckResult,
  checkCrashedHolders,
  counterVerdict,
  frozenDuring,
  type GuardedRecord,
  type Incarnation,
  incarnations,
  type LogEntry,
  MAX_DETAILS,
  type RecipeRecord,
  type RunRecord,
  tokenOrder,
  waitSpread,
  type WorkerRecord,
} from "./checks.ts";
import type { Recipe } from "./events.ts";
import type { LockEvent } from "./monitor.ts";

/** A line's admission rule: entitled while fewer than `limit` keys under `prefix` older than one's own are alive. */
export interface Rule {
  prefix: string;
  limit: number;
}

/** One acquisition a recipe worker reported. `keys[i]` is its key in the line of `names[i]`. */
export interface Holding {
  worker: WorkerRecord;
  recipe: Recipe;
  keys: string[];
  names: string[];
  token: number;
  /** The revision of the response that showed it acquired. */
  at: number;
  t: number;
}

/** The rule of each line a holding of `recipe` on `names` stands in, in the order of `names`. */
export function rulesOf(recipes: RecipeRecord, recipe: Recipe, names: readonly string[]): Rule[] {
  switch (recipe) {
    case "semaphore":
      return [{ prefix: recipes.semaphore.prefix, limit: recipes.permits }];
    case "reader":
      return [{ prefix: recipes.rwlock.writers, limit: 1 }];
    case "writer":
      return [{ prefix: recipes.rwlock.prefix, limit: 1 }];
    case "lock-all":
    case "name-mutex":
    case "name-pair":
      return names.map((name) => ({ prefix: `${name}/`, limit: 1 }));
  }
}

export function holdings(record: RunRecord): Holding[] {
  const out: Holding[] = [];
  for (const worker of record.workers) {
    for (const e of worker.events) {
      if (e.ev !== "acquired" || e.recipe === undefined) continue;
      out.push({
        worker,
        recipe: e.recipe,
        keys: e.keys ?? [e.key],
        names: e.names ?? [],
        token: e.token,
        at: e.at ?? e.token,
        t: e.t,
      });
    }
  }
  return out;
}

/** Every recipe attempt, per counter written: one Attempt per counter a fenced txn would have incremented. */
export function recipeAttempts(record: RunRecord): Map<string, Attempt[]> {
  const byCounter = new Map<string, Attempt[]>();
  for (const worker of record.workers) {
    const byAttempt = new Map<string, Attempt[]>();
    for (const e of worker.events) {
      if (e.ev === "fenced-sent") {
        const made = e.writes.map(
          (w): Attempt => ({
            worker: worker.id,
            attempt: e.attempt,
            token: e.token,
            logKey: w.logKey,
            outcome: "unreported",
          }),
        );
        e.writes.forEach((w, i) => {
          byCounter.set(w.counterKey, [...(byCounter.get(w.counterKey) ?? []), made[i]!]);
        });
        byAttempt.set(e.attempt, made);
      } else if (e.ev === "commit") {
        for (const a of byAttempt.get(e.attempt) ?? [])
          Object.assign(a, {
            outcome: e.outcome,
            code: e.code,
            ownKeyHeld: e.ownKeyHeld,
            counterMoved: e.counterMoved,
          });
      }
    }
  }
  return byCounter;
}

/**
 * A question for the line: at `revision`, how many keys under `prefix` with a create
 * revision below `token` were alive?
 */
export interface Placement {
  revision: number;
  prefix: string;
  token: number;
}

/** Answers every placement from the monitor's events (the line after every event at or before the revision). */
export function olderAlive(events: readonly LockEvent[], placements: readonly Placement[]): number[] {
  const sorted = [...events].sort((a, b) => a.revision - b.revision);
  const order = placements.map((_, i) => i).sort((a, b) => placements[a]!.revision - placements[b]!.revision);
  const alive = new Map<string, number>();
  const out = placements.map(() => 0);
  let next = 0;
  for (const i of order) {
    const p = placements[i]!;
    for (; next < sorted.length && sorted[next]!.revision <= p.revision; next++) {
      const e = sorted[next]!;
      if (e.type === "put") alive.set(e.key, e.createRevision);
      else alive.delete(e.key);
    }
    let n = 0;
    for (const [key, create] of alive) if (create < p.token && key.startsWith(p.prefix)) n++;
    out[i] = n;
  }
  return out;
}

/** Each labelled placement that broke its rule, described. */
function unentitled(
  events: readonly LockEvent[],
  asked: ReadonlyArray<{ placement: Placement; limit: number; label: string }>,
): string[] {
  const counts = olderAlive(
    events,
    asked.map((a) => a.placement),
  );
  return asked.flatMap((a, i) =>
    counts[i]! >= a.limit
      ? [
          `${a.label} at revision ${a.placement.revision} with ${counts[i]} older key(s) ` +
            `alive under ${a.placement.prefix} (at most ${a.limit - 1})`,
        ]
      : [],
  );
}

/** A holding's span in one line: from the revision that showed it acquired to its key's delete. */
interface Span {
  holding: Holding;
  line: string;
  from: number;
  to: number;
}

function spans(recipes: RecipeRecord, held: readonly Holding[]): Span[] {
  const deletedAt = new Map(
    incarnations(recipes.lineEvents).map((i) => [`${i.key}@${i.create}`, i.deleteRevision ?? Infinity]),
  );
  return held.flatMap((h) =>
    rulesOf(recipes, h.recipe, h.names).map((rule, i) => ({
      holding: h,
      // A reader's rule looks at the writers only, but it shares the read-write lock's line with them.
      line: h.recipe === "reader" ? recipes.rwlock.prefix : rule.prefix,
      from: h.at,
      to: deletedAt.get(`${h.keys[i]}@${h.token}`) ?? Infinity,
    })),
  );
}

/**
 * The most holdings of each line at once, by revision (a holding counts from the revision that showed it
 * acquired until its key was deleted), and the first revisions where `tooMany` said a line held too many.
 */
export function occupancy(
  all: readonly Span[],
  tooMany: (holders: readonly Holding[]) => boolean,
): { max: Map<string, number>; overflows: string[] } {
  const edges = all.flatMap((s) => [
    { revision: s.from, enter: true, span: s },
    { revision: s.to, enter: false, span: s },
  ]);
  // At one revision a delete ends a span before a span starting there begins.
  edges.sort((a, b) => a.revision - b.revision || Number(a.enter) - Number(b.enter));
  const inside = new Map<string, Set<Span>>();
  const max = new Map<string, number>();
  const overflows: string[] = [];
  for (const edge of edges) {
    const set = inside.get(edge.span.line) ?? new Set<Span>();
    inside.set(edge.span.line, set);
    if (!edge.enter) {
      set.delete(edge.span);
      continue;
    }
    if (edge.span.from >= edge.span.to) continue; // Reported after its key had gone: never held by the store.
    set.add(edge.span);
    max.set(edge.span.line, Math.max(max.get(edge.span.line) ?? 0, set.size));
    const holders = [...set].map((s) => s.holding);
    if (tooMany(holders) && overflows.length < MAX_DETAILS) {
      overflows.push(
        `${edge.span.line} at ` +
          `revision ${edge.revision}: ${holders.map((h) => `${h.worker.id} ${h.recipe}@${h.token}`).join(", ")}`,
      );
    }
  }
  return { max, overflows };
}

/** Refused fenced writes whose keys were all still held while the counter moved: two holders at once. */
function overlaps(list: readonly Attempt[]): Attempt[] {
  return list.filter((a) => a.outcome === "refused" && a.ownKeyHeld === true && a.counterMoved === true);
}

function guardedOf(recipes: RecipeRecord): GuardedRecord[] {
  return [recipes.semaphore, recipes.rwlock, ...recipes.names];
}

export function checkRecipeCounters(record: RunRecord, recipes: RecipeRecord): CheckResult {
  const byCounter = recipeAttempts(record);
  const verdicts = guardedOf(recipes).map((g) => ({
    g,
    v: counterVerdict(g.counter, g.logs, byCounter.get(g.counterKey) ?? []),
  }));
  return {
    name: "recipe counters match their commits (no lost update)",
    ok: verdicts.every(({ v }) => v.ok),
    summary: verdicts.map(({ g, v }) => `${shortName(g.name)}: ${v.summary}`).join("; "),
    details: verdicts.flatMap(({ g, v }) => v.details.map((d) => `${shortName(g.name)}: ${d}`)).slice(0, MAX_DETAILS),
  };
}

/** Placements of `held` at the revision that showed each acquired, and of each landed commit in `logs`. */
function placementsOf(
  recipes: RecipeRecord,
  held: readonly Holding[],
  commits: ReadonlyArray<{ logs: readonly LogEntry[]; rule: Rule; what: string }>,
) {
  return [
    ...held.flatMap((h) =>
      rulesOf(recipes, h.recipe, h.names).map((rule) => ({
        placement: { revision: h.at, prefix: rule.prefix, token: h.token },
        limit: rule.limit,
        label: `${h.worker.id} ${h.recipe} ${h.keys.join(",")}@${h.token} acquired`,
      })),
    ),
    ...commits.flatMap(({ logs, rule, what }) =>
      logs.map((l) => ({
        placement: { revision: l.modRevision, prefix: rule.prefix, token: l.token },
        limit: rule.limit,
        label: `${what} commit ${l.attempt} (token ${l.token})`,
      })),
    ),
  ];
}

/**
 * Never more than `permits` holders: by the revision each holder was admitted at,
 * each commit landed at, and the line.
 */
export function checkSemaphore(record: RunRecord, recipes: RecipeRecord): CheckResult {
  const { permits, semaphore } = recipes;
  const held = holdings(record).filter((h) => h.recipe === "semaphore");
  const rule = rulesOf(recipes, "semaphore", [])[0]!;
  const bad = unentitled(
    recipes.lineEvents,
    placementsOf(recipes, held, [{ logs: semaphore.logs, rule, what: "semaphore" }]),
  );
  const { max, overflows } = occupancy(spans(recipes, held), (holders) => holders.length > permits);
  const tried = recipeAttempts(record).get(semaphore.counterKey) ?? [];
  const casLost = overlaps(tried).length;
  const fencedOut = tried.filter((a) => a.outcome === "refused" && a.ownKeyHeld === false).length;
  const details = [...overflows.map((o) => `more than ${permits} holders: ${o}`), ...bad];
  return {
    name: `semaphore: never more than its ${permits} permits held at once`,
    ok: details.length === 0,
    summary:
      `${held.length} permits granted, at most ${max.get(semaphore.prefix) ?? 0} held at once (by revision); ` +
      `${bad.length} admissions or commits with ${permits} or more older permits alive, ` +
      `of ${held.length} + ${semaphore.logs.length}; ` +
      `${casLost} writes lost the counter's CAS to another holder, ${fencedOut} stale holders fenced out`,
    details: details.slice(0, MAX_DETAILS),
  };
}

/**
 * A writer never overlaps a reader or another writer: every admission, writer commit and reader's fenced
 * read placed by its rule; the line never holds a writer beside anyone; no refused write found its lock held
 * while the counter had moved; and the counter never moved between a reader's two fenced reads.
 */
export function checkRWLock(record: RunRecord, recipes: RecipeRecord): CheckResult {
  const { rwlock } = recipes;
  const held = holdings(record).filter((h) => h.recipe === "reader" || h.recipe === "writer");
  const writerRule = rulesOf(recipes, "writer", [])[0]!;
  const readerRule = rulesOf(recipes, "reader", [])[0]!;
  const reads: Array<{
    worker: string;
    key: string;
    token: number;
    pass: number;
    revision: number;
    modRevision: number;
  }> = [];
  for (const worker of record.workers) {
    for (const e of worker.events) {
      if (e.ev === "read" && e.outcome === "ok")
        reads.push({
          worker: worker.id,
          key: e.key,
          token: e.token,
          pass: e.pass,
          revision: e.revision ?? 0,
          modRevision: e.modRevision ?? 0,
        });
    }
  }
  const bad = unentitled(recipes.lineEvents, [
    ...placementsOf(recipes, held, [{ logs: rwlock.logs, rule: writerRule, what: "writer" }]),
    ...reads.map((r) => ({
      placement: { revision: r.revision, prefix: readerRule.prefix, token: r.token },
      limit: 1,
      label: `${r.worker} fenced read ${r.pass} of ${r.key}@${r.token}`,
    })),
  ]);
  const isWriter = (h: Holding) => h.recipe === "writer";
  const { max, overflows } = occupancy(spans(recipes, held), (holders) => {
    const writers = holders.filter(isWriter).length;
    return writers > 1 || (writers === 1 && holders.length > 1);
  });
  const moved: string[] = [];
  const byHold = new Map<string, typeof reads>();
  for (const r of reads) byHold.set(`${r.key}@${r.token}`, [...(byHold.get(`${r.key}@${r.token}`) ?? []), r]);
  for (const [hold, pair] of byHold) {
    const seen = new Set(pair.map((r) => r.modRevision));
    if (seen.size > 1)
      moved.push(
        `${pair[0]!.worker} read ${hold}: ` +
          `the counter moved between its fenced reads (mod revisions ${[...seen].join(", ")})`,
      );
  }
  const writesUnderLiveLock = overlaps(recipeAttempts(record).get(rwlock.counterKey) ?? []);
  const details = [
    ...overflows.map((o) => `a writer beside another holder: ${o}`),
    ...bad,
    ...moved,
    ...writesUnderLiveLock.map(
      (a) => `${a.attempt} (token ${a.token}): the counter moved while its write lock was held`,
    ),
  ];
  const readers = held.filter((h) => h.recipe === "reader").length;
  return {
    name: "read-write lock: a writer never overlaps a reader or another writer",
    ok: details.length === 0,
    summary:
      `${readers} read holds (${reads.length} fenced reads, ${byHold.size} ` +
      `holds read), ${held.length - readers} write holds (${rwlock.logs.length} commits); ` +
      `at most ${max.get(rwlock.prefix) ?? 0} holders ` +
      `at once; ${overflows.length} overlaps by revision, ${bad.length} misplaced admissions, reads or commits, ` +
      `${moved.length} read holds that saw a write, ${writesUnderLiveLock.length} writes refused under a live lock`,
    details: details.slice(0, MAX_DETAILS),
  };
}

/** lockAll holders and plain mutex holders of a shared name never hold it together. */
export function checkSharedNames(record: RunRecord, recipes: RecipeRecord): CheckResult {
  const held = holdings(record).filter((h) => h.recipe === "lock-all" || h.recipe === "name-mutex");
  const byCounter = recipeAttempts(record);
  const commits = recipes.names.map((n) => ({
    logs: n.logs,
    rule: { prefix: n.prefix, limit: 1 },
    what: shortName(n.name),
  }));
  const bad = unentitled(recipes.lineEvents, placementsOf(recipes, held, commits));
  const { max, overflows } = occupancy(spans(recipes, held), (holders) => holders.length > 1);
  const underLiveLock = recipes.names.flatMap((n) =>
    overlaps(byCounter.get(n.counterKey) ?? []).map((a) => ({ n, a })),
  );
  const multi = held.filter((h) => h.recipe === "lock-all");
  const details = [
    ...overflows.map((o) => `two holders of one name: ${o}`),
    ...bad,
    ...underLiveLock.map(
      ({ n, a }) => `${a.attempt} (token ${a.token}): ${shortName(n.name)}'s counter moved while its locks were held`,
    ),
  ];
  return {
    name: "lockAll and mutex holders of a shared name never overlap",
    ok: details.length === 0,
    summary:
      `${multi.length} lockAll holds (${multi.filter((h) => h.names.length === 2).length} ` +
      `of 2 names, ${multi.filter((h) => h.names.length === 3).length} of 3), ` +
      `${held.length - multi.length} mutex holds; ` +
      `most holders of one name at once: ${Math.max(0, ...recipes.names.map((n) => max.get(n.prefix) ?? 0))}; ` +
      `${overflows.length} overlaps by revision, ${bad.length} ` +
      `misplaced admissions or commits, ${underLiveLock.length} writes refused under live locks`,
    details: details.slice(0, MAX_DETAILS),
  };
}

/**
 * Fencing tokens increase per name: in commit order on the read-write lock's counter and on each shared
 * name's counter (a token equal to the one before is one unbroken hold, as for the mutex). A semaphore's
 * holders commit side by side, so there it is the permits' tokens that must all differ.
 */
export function checkRecipeTokens(record: RunRecord, recipes: RecipeRecord): CheckResult {
  const ordered = [recipes.rwlock, ...recipes.names].map((g) => ({ g, order: tokenOrder(g.logs) }));
  const permits = holdings(record).filter((h) => h.recipe === "semaphore");
  const keyOfToken = new Map<number, string>();
  const shared: string[] = [];
  for (const p of permits) {
    const key = keyOfToken.get(p.token);
    if (key !== undefined && key !== p.keys[0]) shared.push(`permits ${key} and ${p.keys[0]} share token ${p.token}`);
    keyOfToken.set(p.token, p.keys[0]!);
  }
  const details = [
    ...ordered.flatMap(({ g, order }) => order.details.map((d) => `${shortName(g.name)}: ${d}`)),
    ...shared,
  ];
  return {
    name: "recipe fencing tokens increase per name",
    ok: details.length === 0,
    summary: `${ordered
      .map(({ g, order }) => `${shortName(g.name)} ${order.logs.length} commits, ${order.details.length} backwards`)
      .join("; ")}; semaphore: ${keyOfToken.size} distinct tokens for ${permits.length} permits granted`,
    details: details.slice(0, MAX_DETAILS),
  };
}

/** One contender of a recipe line: a key, or a lockAll's keys (one lease, one create revision). */
export interface Contender {
  keys: string[];
  lease: string;
  create: number;
  rules: Rule[];
  deleteT?: number | undefined;
  /** The first revision at which every rule admitted it, and when the monitor saw that revision. */
  entitledRevision?: number | undefined;
  entitledT?: number | undefined;
}

/**
 * When each recipe contender became entitled to what it asked for, from the monitor's events alone: the
 * first revision (its own put, or a delete ahead of it) after which every line it stands in admits it.
 */
export function entitlements(recipes: RecipeRecord): Contender[] {
  const byId = new Map<string, Contender>();
  for (const inc of incarnations(recipes.lineEvents)) {
    const name = recipes.names.find((n) => inc.key.startsWith(n.prefix));
    const rule: Rule =
      name !== undefined
        ? { prefix: name.prefix, limit: 1 }
        : inc.key.startsWith(recipes.semaphore.prefix)
          ? rulesOf(recipes, "semaphore", [])[0]!
          : inc.key.startsWith(recipes.rwlock.writers)
            ? rulesOf(recipes, "writer", [])[0]!
            : rulesOf(recipes, "reader", [])[0]!;
    // A lockAll's keys share its lease and create revision; any other contender has one key.
    const id = name !== undefined ? `${inc.lease}@${inc.create}` : `${inc.key}@${inc.create}`;
    const c = byId.get(id) ?? { keys: [], lease: inc.lease, create: inc.create, rules: [] };
    c.keys.push(inc.key);
    c.rules.push(rule);
    if (inc.deleteT !== undefined) c.deleteT = Math.min(c.deleteT ?? Infinity, inc.deleteT);
    byId.set(id, c);
  }
  const sorted = [...recipes.lineEvents].sort((a, b) => a.revision - b.revision);
  const alive = new Map<string, number>();
  const pending = new Set<Contender>();
  const byCreate = new Map<number, Contender[]>();
  for (const c of byId.values()) byCreate.set(c.create, [...(byCreate.get(c.create) ?? []), c]);
  for (let i = 0; i < sorted.length; ) {
    const revision = sorted[i]!.revision;
    let t = Infinity;
    for (; i < sorted.length && sorted[i]!.revision === revision; i++) {
      const e = sorted[i]!;
      t = Math.min(t, e.t);
      if (e.type === "put") alive.set(e.key, e.createRevision);
      else alive.delete(e.key);
    }
    for (const c of byCreate.get(revision) ?? []) pending.add(c);
    for (const c of pending) {
      if (!c.keys.every((k) => alive.get(k) === c.create)) {
        pending.delete(c); // Gone before it was entitled.
        continue;
      }
      const admitted = c.rules.every((rule) => {
        let older = 0;
        for (const [key, create] of alive) if (create < c.create && key.startsWith(rule.prefix)) older++;
        return older < rule.limit;
      });
      if (admitted) {
        Object.assign(c, { entitledRevision: revision, entitledT: t });
        pending.delete(c);
      }
    }
  }
  return [...byId.values()].sort((a, b) => a.create - b.create);
}

/** A key in a recipe line that no acquisition owns, and what the judge saw of it. */
export interface Orphan {
  inc: Incarnation;
  owner: WorkerRecord | undefined;
  why: string;
}

/** The calls that acquire something, in a recipe worker. */
const ACQUIRING = new Set<string>([
  "acquire",
  "readLock",
  "writeLock",
  "lockAll",
  "lock",
  "withSemaphore",
  "withLocks",
  "withLock",
]);

/** One acquisition a recipe worker asked for: from its `asking` to its next, what it took and how its call ended. */
interface Asked {
  t: number;
  names: string[];
  /** Tokens it reported acquired. */
  took: Set<number>;
  /** The names (lines) of what it took: an acquisition of several names takes a key in each, one at a time. */
  tookNames: Set<string>;
  /** The acquisition call, once settled. */
  end?: { t: number; ok: boolean; op: string; code?: string | undefined } | undefined;
}

function askedOf(worker: WorkerRecord): Asked[] {
  const out: Asked[] = [];
  for (const e of worker.events) {
    const current = out.at(-1);
    if (e.ev === "asking") out.push({ t: e.t, names: e.names, took: new Set(), tookNames: new Set() });
    else if (current === undefined) continue;
    else if (e.ev === "acquired") {
      current.took.add(e.token);
      for (const name of e.names ?? current.names) current.tookNames.add(name);
    } else if (e.ev === "call" && ACQUIRING.has(e.op) && current.end === undefined)
      current.end = { t: e.t, ok: e.ok, op: e.op, code: e.code };
  }
  return out;
}

/**
 * Keys in recipe lines that no acquisition owns: each blocks a permit or a place in line, held by no one, until
 * its lease ends (or, for a shared name, its session's next lock of that name adopts it). A key is owned by
 * the acquisition its owner was asking for when it was put: when that one took it, while it is in progress,
 * and for `leaveBoundMs` after it failed (the SDK deletes a failed acquisition's key).
 * So an orphan is a join that landed late (put while its owner asked for other names, or after its acquisition
 * took a key in that line: a copy of an earlier join held up inside etcd) and stood longer than `leaveBoundMs`,
 * or a key a failed acquisition left behind. An acquisition of several names that took one of them still owns
 * the key it waits with in another.
 */
export function orphanKeys(record: RunRecord, recipes: RecipeRecord): Orphan[] {
  const ownerByLease = new Map<string, WorkerRecord>();
  for (const w of record.workers) for (const lease of w.leases) ownerByLease.set(lease, w);
  const asked = new Map(record.workers.map((w) => [w.id, askedOf(w)]));
  const lineOf = (key: string) =>
    [recipes.semaphore, recipes.rwlock, ...recipes.names].find((g) => key.startsWith(`${g.name}/`))?.name;
  const at = (t: number) => `+${((t - record.startedAt) / 1000).toFixed(2)} s`;
  const seen = new Map<string, Incarnation>();
  const out: Orphan[] = [];
  for (const inc of incarnations(recipes.lineEvents)) {
    const before = seen.get(inc.key);
    seen.set(inc.key, inc);
    const owner = ownerByLease.get(inc.lease);
    const line = lineOf(inc.key);
    if (owner === undefined || line === undefined) continue;
    const all = asked.get(owner.id) ?? [];
    // Owned by the acquisition that put it (one asking before the put took it). A later one of the same
    // session may adopt it (a shared name's key), but it stood unowned until then.
    if (all.some((a) => a.t < inc.putT && a.took.has(inc.create))) continue;
    const adopted = all.find((a) => a.t >= inc.putT && a.took.has(inc.create));
    // A key met before: one made again (Go's and etcdctl's layout, `<name>/<leaseHex>`, is one key per lease).
    const again =
      before !== undefined && !recipes.names.some((n) => n.name === line)
        ? `; the same key was created at revision ${before.create} and deleted at ${before.deleteRevision ?? "-"}`
        : "";
    const asking = all.filter((a) => a.t < inc.putT).at(-1);
    const orphan = (why: string) =>
      out.push({
        inc,
        owner,
        why: why + again + (adopted ? `; its owner's acquisition asked at ${at(adopted.t)} adopted it` : ""),
      });
    // A late copy is the SDK's to clean up: its session sweeps it on a renewal, unless a caller of the
    // session adopts it first. It blocks the line only if it stands longer than a failed acquisition's key may.
    const lateKeyGone = Math.min(inc.deleteT ?? Infinity, adopted?.t ?? Infinity) - inc.putT <= recipes.leaveBoundMs;
    const tookThisLine = asking?.tookNames.has(line) === true;
    if (lateKeyGone && (asking === undefined || !asking.names.includes(line) || tookThisLine)) continue;
    if (asking === undefined || !asking.names.includes(line)) {
      orphan(
        `put while its owner was asking ` +
          `for ${asking === undefined ? "nothing" : asking.names.map(shortName).join(",")}`,
      );
    } else if (tookThisLine) {
      orphan(`put after its owner's acquisition took a key in this line (token ${[...asking.took].join(",")})`);
    } else if (
      asking.end !== undefined &&
      !asking.end.ok &&
      (inc.deleteT ?? Infinity) > asking.end.t + recipes.leaveBoundMs &&
      // Frozen or killed before it could leave: its key goes with its lease, as it should.
      !frozenDuring(owner, asking.end.t, asking.end.t + recipes.leaveBoundMs) &&
      (owner.killedAt === undefined || owner.killedAt > asking.end.t + recipes.leaveBoundMs)
    ) {
      orphan(`left behind by ${asking.end.op} failing with ${asking.end.code ?? "?"} at ${at(asking.end.t)}`);
    }
  }
  return out;
}

export function checkOrphanKeys(record: RunRecord, recipes: RecipeRecord): CheckResult {
  const orphans = orphanKeys(record, recipes);
  const at = (t: number) => `+${((t - record.startedAt) / 1000).toFixed(2)} s`;
  const details = orphans.map(({ inc, owner, why }) => {
    const stood = ((inc.deleteT ?? record.workersEndedAt) - inc.putT) / 1000;
    const key = inc.key.slice(inc.key.lastIndexOf("/locks/") + 7);
    return (
      `${key}@${inc.create} (${owner?.id}) put at ${at(inc.putT)}: ${why}; ` +
      `it stood ${stood.toFixed(2)} s, held by no one`
    );
  });
  return {
    name:
      `no orphan recipe keys (every key in a recipe line is acquired, ` +
      `or gone within ${recipes.leaveBoundMs / 1000} s of its acquisition failing or of landing late)`,
    ok: details.length === 0,
    summary: `${orphans.length} keys in recipe lines that no acquisition owned`,
    details: details.slice(0, MAX_DETAILS),
  };
}

export interface RecipeWait {
  worker: string;
  recipe: Recipe | undefined;
  keys: string[];
  token: number;
  entitledT: number;
  acquiredAt?: number | undefined;
  waitMs: number;
}

/**
 * How long each recipe contender took what it was entitled to: from the moment the monitor saw the revision
 * that entitled it until its worker reported it acquired (or its key went, if it never did). "Free" here is
 * the store's: the keys ahead of it deleted, not their owners' "done" (the mutex's check also times an
 * owner's slow release; the recipes share the mutex's release code, which that check already judges).
 * Excluded: contenders whose process was frozen or killed meanwhile.
 */
export function recipeWaits(
  record: RunRecord,
  recipes: RecipeRecord,
): { waits: RecipeWait[]; excluded: number; unknown: number; orphans: number } {
  const ownerByLease = new Map<string, WorkerRecord>();
  for (const w of record.workers) for (const lease of w.leases) ownerByLease.set(lease, w);
  const acquired = new Map<string, { t: number; recipe: Recipe | undefined }>();
  for (const w of record.workers) {
    for (const e of w.events) {
      if (e.ev !== "acquired" || e.recipe === undefined) continue;
      for (const key of e.keys ?? [e.key])
        if (!acquired.has(`${key}@${e.token}`)) acquired.set(`${key}@${e.token}`, { t: e.t, recipe: e.recipe });
    }
  }
  // Keys no caller waits for (checkOrphanKeys judges them).
  const orphaned = new Set(orphanKeys(record, recipes).map(({ inc }) => `${inc.key}@${inc.create}`));
  const waits: RecipeWait[] = [];
  let excluded = 0;
  let unknown = 0;
  let orphans = 0;
  for (const c of entitlements(recipes)) {
    if (c.entitledT === undefined) continue;
    if (orphaned.has(`${c.keys[0]}@${c.create}`)) {
      orphans++;
      continue;
    }
    const owner = ownerByLease.get(c.lease);
    const got = acquired.get(`${c.keys[0]}@${c.create}`);
    const end = got?.t ?? c.deleteT ?? record.workersEndedAt;
    if (owner === undefined) unknown++;
    else if ((owner.killedAt !== undefined && owner.killedAt <= end) || frozenDuring(owner, c.entitledT, end))
      excluded++;
    else
      waits.push({
        worker: owner.id,
        recipe: got?.recipe,
        keys: c.keys,
        token: c.create,
        entitledT: c.entitledT,
        acquiredAt: got?.t,
        waitMs: Math.max(0, end - c.entitledT),
      });
  }
  return { waits, excluded, unknown, orphans };
}

/** No recipe contender sits on what it is entitled to longer than the mutex's free-wait bound. */
export function checkRecipeWaits(record: RunRecord, recipes: RecipeRecord): CheckResult {
  const bound = record.settings.freeWaitBoundMs;
  const { waits, excluded, unknown, orphans } = recipeWaits(record, recipes);
  const { over, spread } = waitSpread(waits, bound);
  const workers = new Map(record.workers.map((w) => [w.id, w]));
  const details = over.map((w) => {
    const kind = workers.get(w.worker)?.kind;
    const how = w.acquiredAt === undefined ? "never took it (its key went)" : "then took it";
    return (
      `${w.worker} (${kind?.recipe} ${kind?.mode}/${kind?.wait}/${kind?.fetch}) ` +
      `entitled with ${w.keys.join(",")}@${w.token} for ${(w.waitMs / 1000).toFixed(2)} s, ${how}`
    );
  });
  if (!record.historyComplete) details.unshift("the monitor's history is incomplete: recipe waits cannot be judged");
  return {
    name: `no recipe contender waits longer than ${bound / 1000} s once the line admits it`,
    ok: details.length === 0,
    summary:
      `${waits.length} entitled: ${spread}; ` +
      `${over.length} over the bound; ${excluded} excluded ` +
      `(frozen or killed), ${unknown} of unknown owner, ${orphans} orphan keys (judged apart)`,
    details: details.slice(0, MAX_DETAILS),
  };
}

/** The mutex's crash check, on the recipe holders frozen or killed on purpose. */
export function checkRecipeHolders(record: RunRecord, recipes: RecipeRecord): CheckResult {
  const result = checkCrashedHolders({ ...record, lockEvents: recipes.lineEvents, holderFaults: recipes.holderFaults });
  return { ...result, name: "a crashed or frozen recipe holder's keys are free within TTL + 1 s" };
}

/** Every recipe check; none for a run without recipe workers. */
export function recipeChecks(record: RunRecord): CheckResult[] {
  const recipes = record.recipes;
  if (recipes === undefined) return [];
  return [
    checkRecipeCounters(record, recipes),
    checkSemaphore(record, recipes),
    checkRWLock(record, recipes),
    checkSharedNames(record, recipes),
    checkRecipeTokens(record, recipes),
    checkOrphanKeys(record, recipes),
    checkRecipeWaits(record, recipes),
    checkRecipeHolders(record, recipes),
  ];
}

/** The last segment of a key path, for short report lines (`chaos/<run>/locks/sem` → `sem`). */
function shortName(name: string): string {
  return name.slice(name.lastIndexOf("/") + 1);
}
