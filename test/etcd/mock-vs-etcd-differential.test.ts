/// <reference path="./provided.d.ts" />
// Differential test over real HTTP: a long seeded sequence of requests (every endpoint the mock serves, valid and
// invalid bodies, integers as JSON numbers) sent in lockstep to a fresh real etcd member and to the mock served by
// etcd-edge/testing/server; every answer must match. The requests run in MOCK_DIFF_LANES (3) lanes, each a
// member and a mock of its own with seed MOCK_DIFF_SEED + lane. Reproduce one lane with MOCK_DIFF_LANES=1,
// MOCK_DIFF_SEED=<its seed> and MOCK_DIFF_OPS=<its request count>.
//
// The member runs the version of the project's etcd (inject("etcdVersion")), and the mock speaks that version's
// wire. The mock copies the member's cluster ID, member ID and name, so headers and the lease IDs etcd picks share
// their prefix. What may legitimately differ is compared loosely, each with its reason (docs/testing.md):
// - lease IDs etcd picks itself: any bijection (the low bits count milliseconds since each member started);
// - timetolive TTL: within 1 s (the two clocks started apart); timetolive keys: in any order (a Go map walk);
// - status dbSize, dbSizeInUse, raftIndex, raftAppliedIndex: storage and raft-log internals; member clientURLs;
// - the header revision of a lock that had to wait and of an observe line: each is the revision at a read the
//   server makes on its own after a delete, so it depends on how fast that read runs, not on the wire;
// - on one watch stream, control lines (created, canceled, progress) against event lines: two goroutines write them;
//   refusals of a create (watch_id -1) as a set without repeats: etcd now and then sends one of two alike;
// - a watch from the past that its body cancels: etcd may catch it up first (caughtUpBeforeCancel).
import fc from "fast-check";
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import type { EtcdVersion } from "../../src/testing/index.js";
import { serveMockEtcd, type MockEtcdServer } from "../../src/testing/server/index.js";
import { sleep, until } from "../support/async.js";
import { startEtcd, type EtcdMember } from "./harness.js";
import { EXPLICIT_LEASES, ops, type Op, type Tpl } from "./mock-vs-etcd-ops.js";

const SEED = Number(process.env.MOCK_DIFF_SEED ?? Date.now() % 2 ** 31);
const OPS = Number(process.env.MOCK_DIFF_OPS ?? 10_000);
/** How long an observer etcd has not answered when the run ends may still take (see finishAll). */
const LATE_OBSERVER_MS = 10_000;
/** Independent member+mock pairs run side by side, each with its own seed (SEED, SEED + 1, ...). */
const LANES = Number(process.env.MOCK_DIFF_LANES ?? 3);

type Side = "real" | "mock";
const SIDES: Side[] = ["real", "mock"];
type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
interface Answer {
  status: number | "dropped" | "no answer";
  body: Json;
}

/** How long one side may lag behind the other's answer (generous: 2 busy cores, several members). */
const OTHER_SIDE_MS = 10_000;

async function etcdVersion(url: string): Promise<string> {
  const v = (await (await fetch(`${url}/version`)).json()) as { etcdserver: string };
  return v.etcdserver;
}

/** The body as JSON, NDJSON lines ({ lines }), or text. */
function parseBody(text: string): Json {
  if (text === "") return "";
  try {
    return JSON.parse(text) as Json;
  } catch {
    const lines = text.split("\n").filter((l) => l.trim() !== "");
    try {
      return { lines: lines.map((l) => JSON.parse(l) as Json) };
    } catch {
      return text;
    }
  }
}

class Mismatch extends Error {}

/** NDJSON lines read in the background until the stream ends or is aborted. */
class Collector {
  readonly lines: Json[] = [];
  status: Answer["status"] = "no answer";
  /** The server ended the stream (not the test's abort). */
  ended = false;
  private buffer = "";

  constructor(response: Promise<Response>) {
    void response
      .then(
        async (res) => {
          this.status = res.status;
          const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
          for (;;) {
            const { value, done } = await reader.read();
            if (done) {
              this.ended = true;
              break;
            }
            this.buffer += value;
            const parts = this.buffer.split("\n");
            this.buffer = parts.pop()!;
            for (const p of parts) if (p.trim() !== "") this.lines.push(JSON.parse(p) as Json);
          }
        },
        (err: unknown) => {
          if ((err as Error).name !== "AbortError") this.status = "dropped";
        },
      )
      .catch(() => {});
  }
}

interface Stream {
  step: number;
  op: Op;
  text: Record<Side, string>;
  abort: AbortController;
  collectors: Record<Side, Collector>;
  diverged: boolean;
  /** An observer's: how many of the mock's lines were looked up on etcd, and those etcd had (kvKey, the mock's). */
  looked: number;
  onEtcd: Set<string>;
  /** A watch stream's: watches etcd caught up before the body canceled them, their events checked on the mock. */
  early: Set<string>;
}

interface Pending {
  step: number;
  op: Op;
  text: Record<Side, string>;
  abort: Record<Side, AbortController>;
  answers: Partial<Record<Side, Answer>>;
  settled: Promise<unknown>;
  /** The revision once the waiter joined its line (its key's create revision). */
  joinedAt: number;
}

/** A key-value as etcd's range and observe answer it (the fields read here). */
interface WireKv {
  key: string;
  create_revision: string;
  mod_revision: string;
}

/** The lock or election name of a lock, campaign or observe request. */
function nameOf(text: Record<Side, string>): string {
  return atob((JSON.parse(text.mock) as { name: string }).name);
}

/** The key an observer's line reports. */
function kvOf(line: Json): WireKv | undefined {
  return (line as { result?: { kv?: WireKv } }).result?.kv;
}

/** A key at one version: its name, create and mod revisions. */
function kvKey(kv: WireKv): string {
  return `${atob(kv.key)}@${kv.create_revision}/${kv.mod_revision}`;
}

/** Observe lines as `key@create_revision/mod_revision`, for an error message. */
function leaders(lines: Json[]): string {
  return lines
    .map((line) => {
      const kv = kvOf(line);
      return kv ? kvKey(kv) : JSON.stringify(line);
    })
    .join(" ");
}

/** How far from its twin etcd may list a lease (see sameLeases). */
const MAX_SHIFT = 2;

class Differential {
  /** Lease IDs etcd picked, real ↔ mock, in the order they appeared. */
  private readonly leases: Record<Side, string>[] = [];
  private readonly toMock = new Map<string, string>();
  private readonly toReal = new Map<string, string>();
  /**
   * Leases granted by /v3/lease/grant with ID 0 (long TTLs); any other non-explicit lease is
   * a lock's or campaign's session.
   */
  private readonly granted = new Set<string>();
  private readonly lockKeys: Record<Side, string>[] = [];
  private readonly leaders: Record<Side, Json>[] = [];
  private readonly pending: Pending[] = [];
  private readonly streams: Stream[] = [];
  compared = 0;
  /** Answers per path and status, for the run's summary. */
  readonly seen = new Map<string, number>();
  /**
   * etcd's internal watchers seen stalling: waiters left on an empty line (see settle), observers
   * stopped short (see observerBehind).
   */
  readonly stalled: string[] = [];
  /** Leases etcd listed away from the mock's place for them (see sameLeases). */
  readonly displaced = new Set<string>();
  /** Watch streams where etcd never answered the body's last create (see withoutLastCreate). */
  readonly unanswered: string[] = [];
  /** Watches etcd caught up before the same body canceled them (see caughtUpBeforeCancel). */
  readonly caughtUpEarly: string[] = [];

  constructor(
    private readonly base: Record<Side, string>,
    private readonly server: MockEtcdServer,
    private readonly seed: number,
  ) {}

  // ---- requests ---------------------------------------------------------------------------------------------

  private render(t: Tpl, side: Side): string {
    if (t === null || typeof t !== "object") return JSON.stringify(t);
    if (Array.isArray(t)) return `[${t.map((x) => this.render(x, side)).join(",")}]`;
    if ("$raw" in t) return t.$raw as string;
    if ("$lease" in t) {
      const ref = t.$lease as bigint | number;
      const id =
        typeof ref === "bigint"
          ? String(ref)
          : (this.leases[ref % Math.max(1, this.leases.length)]?.[side] ?? "424242");
      return t.number ? id : JSON.stringify(id);
    }
    if ("$rev" in t) {
      const rev = String(this.server.mock.revision + (t.$rev as number));
      return t.number ? rev : JSON.stringify(rev);
    }
    if ("$lockKey" in t) {
      const n = t.$lockKey as number;
      return JSON.stringify(this.lockKeys[n % Math.max(1, this.lockKeys.length)]?.[side] ?? btoa("L1/b"));
    }
    if ("$leader" in t) {
      const n = t.$leader as number;
      const known = this.leaders[this.leaders.length - 1 - (n % Math.max(1, this.leaders.length))]?.[side] as
        | Record<string, Json>
        | undefined;
      const leader: Record<string, Json> = {
        ...(known ?? { name: btoa("E1"), key: btoa("E1/b"), rev: "1", lease: "11" }),
      };
      if (t.rev) leader.rev = String(Number(leader.rev ?? 0) + (t.rev as number));
      if (t.noLease) delete leader.lease;
      return JSON.stringify(leader);
    }
    const fields = Object.entries(t).filter(([, v]) => v !== undefined);
    return `{${fields.map(([k, v]) => `${JSON.stringify(k)}:${this.render(v as Tpl, side)}`).join(",")}}`;
  }

  /** The body per side: raw text, a template, or (streams) several templates one after another. */
  private texts(op: Op): Record<Side, string> {
    const body = op.body;
    const one = (side: Side) =>
      typeof body === "object" && body !== null && !Array.isArray(body) && "$text" in body
        ? (body.$text as string)
        : Array.isArray(body) && (op.kind === "watch" || op.kind === "keepalive")
          ? body.map((b) => this.render(b, side)).join("")
          : this.render(body as Tpl, side);
    return { real: one("real"), mock: one("mock") };
  }

  private async send(side: Side, path: string, text: string, signal?: AbortSignal): Promise<Answer> {
    let res: Response;
    try {
      res = await fetch(`${this.base[side]}${path}`, { method: "POST", body: text, ...(signal ? { signal } : {}) });
    } catch (err) {
      if ((err as Error).name === "AbortError") throw err;
      return { status: "dropped", body: null };
    }
    return { status: res.status, body: parseBody(await res.text()) };
  }

  // ---- comparison -------------------------------------------------------------------------------------------

  private leaseEq(real: string, mock: string): boolean {
    if (real === mock) return true;
    if (this.toMock.has(real) || this.toReal.has(mock)) return this.toMock.get(real) === mock;
    if (EXPLICIT_LEASES.some((id) => String(id) === real || String(id) === mock)) return false;
    this.toMock.set(real, mock);
    this.toReal.set(mock, real);
    this.leases.push({ real, mock });
    return true;
  }

  /** The same key at the same version: revisions first, so that keyEq pairs no unrelated lease IDs. */
  private sameKv(real: WireKv, mock: WireKv): boolean {
    return (
      real.create_revision === mock.create_revision &&
      real.mod_revision === mock.mod_revision &&
      this.keyEq(real.key, mock.key)
    );
  }

  /** Keys are equal, or equal but for the lease ID in hex at their end (a lock's or candidate's key). */
  private keyEq(real: string, mock: string): boolean {
    if (real === mock) return true;
    const pattern = /^(.*\/)(-?[0-9a-f]+)$/s;
    const r = pattern.exec(atob(real));
    const m = pattern.exec(atob(mock));
    if (!r || !m || r[1] !== m[1]) return false;
    const id = (hex: string) => String(hex.startsWith("-") ? -BigInt(`0x${hex.slice(1)}`) : BigInt(`0x${hex}`));
    return this.leaseEq(id(r[2]!), id(m[2]!));
  }

  private eq(real: Json, mock: Json, path: string, loose: Set<string>): void {
    const fail = (why: string) => {
      throw new Mismatch(`${path || "body"}: ${why}`);
    };
    const field = path.slice(path.lastIndexOf(".") + 1);
    if (loose.has(field)) return;
    if (typeof real === "string" && typeof mock === "string") {
      if ((field === "ID" || field === "lease") && /^-?\d+$/.test(real)) {
        if (!this.leaseEq(real, mock)) fail(`lease ${real} ≠ ${mock}`);
        return;
      }
      if (field === "key" && real !== mock && !this.keyEq(real, mock)) fail(`key ${atob(real)} ≠ ${atob(mock)}`);
      if (field === "TTL" && loose.has("TTL±1")) {
        if (Math.abs(Number(real) - Number(mock)) > 1) fail(`TTL ${real} ≠ ${mock}`);
        return;
      }
      // protobuf-go picks the space after "proto:" per binary (U+0020 or U+00A0), to discourage matching on it.
      const text = (x: string) => x.replace(/^proto:[\u00a0 ]/, "proto: ");
      if (field !== "key" && text(real) !== text(mock)) fail(`${JSON.stringify(real)} ≠ ${JSON.stringify(mock)}`);
      return;
    }
    if (Array.isArray(real) && Array.isArray(mock)) {
      if (real.length !== mock.length) fail(`${real.length} items ≠ ${mock.length}`);
      if (field === "keys") return this.sameSet(real, mock, path, loose);
      if (field === "leases") return this.sameLeases(real, mock, path, loose);
      real.forEach((r, i) => {
        this.eq(r, mock[i]!, `${path}[${i}]`, loose);
      });
      return;
    }
    if (
      real &&
      mock &&
      typeof real === "object" &&
      typeof mock === "object" &&
      !Array.isArray(real) &&
      !Array.isArray(mock)
    ) {
      const rk = Object.keys(real)
        .filter((k) => !loose.has(k))
        .sort();
      const mk = Object.keys(mock)
        .filter((k) => !loose.has(k))
        .sort();
      if (rk.join() !== mk.join()) fail(`fields ${rk.join(",")} ≠ ${mk.join(",")}`);
      for (const k of rk) this.eq(real[k]!, mock[k]!, path ? `${path}.${k}` : k, loose);
      return;
    }
    if (real !== mock) fail(`${JSON.stringify(real)} ≠ ${JSON.stringify(mock)}`);
  }

  /**
   * etcd lists leases by expiry, read on its own clock (`leasesByExpiry`); the mock by its deadlines. Leases whose
   * expiries fall within the two sides' timing apart (granted or renewed about a TTL's difference apart) may come
   * in another order: two neighbours swapped, or three rotated (met in CI on 3.7). So a lease both sides know
   * already may sit up to MAX_SHIFT places from its twin; each such lease is counted, the rest compare in order.
   */
  private sameLeases(real: Json[], mock: Json[], path: string, loose: Set<string>): void {
    const idOf = (l: Json | undefined) => (l as { ID?: string } | undefined)?.ID ?? "";
    // Mapped already, or an ID both sides share (one the test chose).
    const known = (l: Json) => this.toMock.has(idOf(l)) || mock.some((m) => idOf(m) === idOf(l));
    const taken = new Set<number>();
    const twin = (r: Json, at: number): boolean => {
      try {
        this.eq(r, mock[at]!, `${path}[${at}]`, loose);
        taken.add(at);
        return true;
      } catch (err) {
        if (!(err instanceof Mismatch)) throw err;
        return false;
      }
    };
    for (let i = 0; i < real.length; i++) {
      const r = real[i]!;
      if (!taken.has(i) && twin(r, i)) continue;
      // Only a lease both sides know may sit elsewhere: any other reports its mismatch in place.
      if (!known(r)) {
        this.eq(r, mock[i]!, `${path}[${i}]`, loose);
        throw new Mismatch(`${path}[${i}]: lease ${idOf(r)} is out of place`);
      }
      let found = false;
      for (let at = Math.max(0, i - MAX_SHIFT); at <= Math.min(mock.length - 1, i + MAX_SHIFT) && !found; at++) {
        found = at !== i && !taken.has(at) && twin(r, at);
      }
      if (!found) throw new Mismatch(`${path}[${i}]: lease ${idOf(r)} has no twin within ${MAX_SHIFT} places`);
      this.displaced.add(idOf(r));
    }
  }

  /** timetolive keys: etcd lists them from a Go map, so in no particular order. */
  private sameSet(real: Json[], mock: Json[], path: string, loose: Set<string>): void {
    const left = [...mock];
    for (const r of real) {
      const i = left.findIndex((m) => {
        try {
          this.eq(r, m, `${path}.key`, loose);
          return true;
        } catch {
          return false;
        }
      });
      if (i < 0) throw new Mismatch(`${path}: ${JSON.stringify(r)} missing`);
      left.splice(i, 1);
    }
  }

  private compare(
    step: number,
    op: Op,
    text: Record<Side, string>,
    real: Answer,
    mock: Answer,
    loose: string[] = [],
  ): void {
    const looseSet = new Set(loose);
    if (op.path === "/v3/maintenance/status")
      for (const f of ["dbSize", "dbSizeInUse", "raftIndex", "raftAppliedIndex"]) looseSet.add(f);
    if (op.path === "/v3/cluster/member/list") looseSet.add("clientURLs");
    if (op.path === "/v3/lease/timetolive") looseSet.add("TTL±1");
    try {
      if (real.status !== mock.status) throw new Mismatch(`status ${real.status} ≠ ${mock.status}`);
      this.eq(real.body, mock.body, "", looseSet);
      this.compared++;
      const tag = `${op.path} ${real.status}`;
      this.seen.set(tag, (this.seen.get(tag) ?? 0) + 1);
    } catch (err) {
      if (!(err instanceof Mismatch)) throw err;
      const request = text.real === text.mock ? text.real : text;
      // MOCK_DIFF_VERBOSE=1 shows whole answers.
      // A watch stream's control lines go first: its events would push them past the cut.
      const show = (a: Answer) => {
        const control = (a.body as { control?: Json } | null)?.control;
        return JSON.stringify(control === undefined ? a : { control, ...a }).slice(
          0,
          process.env.MOCK_DIFF_VERBOSE ? undefined : 2_000,
        );
      };
      throw new Error(
        `mock ≠ etcd at seed ${this.seed} ` +
          `step ${step}: ${op.path} ${JSON.stringify(request).slice(0, 1_000)}\n  ${err.message}\n  ` +
          `etcd: ${show(real)}\n  mock: ${show(mock)}`,
      );
    }
  }

  // ---- running ----------------------------------------------------------------------------------------------

  async run(step: number, op: Op): Promise<void> {
    // etcd's own watchers (a waiting lock's, an observer's) start in the past and sync on a 100 ms loop; a
    // compaction before that cancels them (the lock fails, the observe stream ends). The mock syncs at once, so
    // give etcd's loop its turn first.
    if (
      op.path === "/v3/kv/compaction" &&
      (this.pending.length > 0 || this.streams.some((s) => s.op.kind === "observe"))
    )
      await sleep(150);
    const text = this.texts(op);
    const before = this.waitedOnKeys();
    if (op.kind === "watch" || op.kind === "observe") await this.openStream(step, op, text);
    else if (op.kind === "blocking") await this.blocking(step, op, text);
    else {
      const [real, mock] = await Promise.all(SIDES.map((s) => this.send(s, op.path, text[s])));
      this.compare(step, op, text, real!, mock!);
      this.learn(op, real!, mock!);
    }
    // etcd removes compacted revisions from its backend in the background, so for a few ms a watch from the compact
    // revision still replays its tombstones; physical: true answers only after that. Let it finish.
    if (op.path === "/v3/kv/compaction" && !text.real.includes('"physical":true')) await sleep(50);
    if (process.env.MOCK_DIFF_TRACE)
      console.info(`step ${step} rev ${this.server.mock.revision} ${op.path} ${text.real.slice(0, 300)}`);
    if (this.usesSessionLease(op, text)) {
      // Streams first: an observer reads the new leader on its own after a delete, before the sweep deletes more.
      await this.settle(before !== this.waitedOnKeys());
      await this.sweepSessions(step);
    }
    await this.settle(before !== this.waitedOnKeys());
  }

  /** Whether no key older than the waiter's is left in its line on etcd. */
  private async lineEmptyOnEtcd(p: Pending): Promise<boolean> {
    const name = nameOf(p.text);
    // Keys, not count_only: etcd counts a range before it filters by revision, so a count would include the
    // waiter's own key and every newer one.
    const { kvs } = await this.readLine("real", name, { max_create_revision: String(p.joinedAt - 1), keys_only: true });
    return (kvs ?? []).length === 0;
  }

  /** A waiter's whole line on one side, for an error message. */
  private async line(side: Side, p: Pending): Promise<string> {
    const name = nameOf(p.text);
    const { kvs } = await this.readLine(side, name, { keys_only: true });
    return (kvs ?? []).map((kv) => `${atob(kv.key)}@${kv.create_revision}`).join(", ") || "empty";
  }

  /** The keys under `name/` on one side, as etcd's range answers them; `fields`: the range's other fields. */
  private async readLine(
    side: Side,
    name: string,
    fields: Record<string, unknown>,
  ): Promise<{ kvs?: WireKv[]; count?: string }> {
    const query = JSON.stringify({ key: btoa(`${name}/`), range_end: btoa(`${name}0`), ...fields });
    return (await (await fetch(`${this.base[side]}/v3/kv/range`, { method: "POST", body: query })).json()) as {
      kvs?: WireKv[];
      count?: string;
    };
  }

  /** The keys under the names that waiting locks and campaigns wait on (mock side). */
  private waitedOnKeys(): string {
    const names = new Set(this.pending.map((p) => nameOf(p.text)));
    return [...names].flatMap((name) => this.server.mock.keys(`${name}/`)).join("\n");
  }

  private learn(op: Op, real: Answer, mock: Answer): void {
    if (real.status !== 200) return;
    const r = real.body as Record<string, Json>;
    const m = mock.body as Record<string, Json>;
    if (op.path === "/v3/lease/grant" && typeof r.ID === "string" && !EXPLICIT_LEASES.some((id) => String(id) === r.ID))
      this.granted.add(r.ID);
    if (op.path === "/v3/lock/lock") this.lockKeys.push({ real: r.key as string, mock: m.key as string });
    if (op.path === "/v3/election/campaign") this.leaders.push({ real: r.leader!, mock: m.leader! });
  }

  /** A lock, campaign, proclaim or resign without a lease makes the server grant a 60 s lease nobody renews. */
  private usesSessionLease(op: Op, text: Record<Side, string>): boolean {
    if (!["/v3/lock/lock", "/v3/election/campaign", "/v3/election/proclaim", "/v3/election/resign"].includes(op.path))
      return false;
    return !/"lease":\s*"?[1-9-]/.test(text.real);
  }

  /**
   * Revokes the session leases (60 s) on both sides before they could expire at different moments: lists the
   * leases (compared), maps the new IDs by position, revokes each (compared).
   */
  private async sweepSessions(step: number): Promise<void> {
    const op: Op = { kind: "unary", path: "/v3/lease/leases", body: {} };
    const [real, mock] = await Promise.all(SIDES.map((s) => this.send(s, op.path, "{}")));
    this.compare(step, op, { real: "{}", mock: "{}" }, real!, mock!);
    const ids = (a: Answer) => ((a.body as { leases?: { ID: string }[] }).leases ?? []).map((l) => l.ID);
    const mockIds = ids(mock!);
    for (const [i, id] of ids(real!).entries()) {
      if (EXPLICIT_LEASES.some((e) => String(e) === id) || this.granted.has(id) || /^\d{1,3}$/.test(id)) continue;
      const text = { real: JSON.stringify({ ID: id }), mock: JSON.stringify({ ID: mockIds[i] }) };
      const revoke: Op = { kind: "unary", path: "/v3/lease/revoke", body: { $text: "" } };
      const [r, m] = await Promise.all(SIDES.map((s) => this.send(s, revoke.path, text[s])));
      this.compare(step, revoke, text, r!, m!);
    }
  }

  /**
   * Lock and campaign may wait. Answered on both sides at once: compared as is. Still waiting on both: kept,
   * and compared once they answer (a waiting lock's header revision loosely). One side only: a difference.
   */
  private async blocking(step: number, op: Op, text: Record<Side, string>): Promise<void> {
    const abort = { real: new AbortController(), mock: new AbortController() };
    const p: Pending = { step, op, text, abort, answers: {}, settled: Promise.resolve(), joinedAt: 0 };
    const [real, mock] = SIDES.map((s) =>
      this.send(s, op.path, text[s], abort[s].signal).then(
        (a) => {
          p.answers[s] = a;
        },
        () => {},
      ),
    ) as [Promise<void>, Promise<void>];
    p.settled = Promise.all([real, mock]);
    // The mock answers at once unless it waits; etcd takes a few ms more.
    await Promise.race([mock, sleep(40)]);
    if (p.answers.mock) {
      await Promise.race([real, sleep(OTHER_SIDE_MS)]);
      if (!p.answers.real)
        throw new Error(`seed ${this.seed} step ${step}: ${op.path} ${text.real} answered on the mock only`);
      return this.finish(p, false);
    }
    // Waiting on the mock: etcd must be waiting too, once its key has joined the line.
    await this.joined(text);
    if (p.answers.real) {
      await Promise.race([mock, sleep(OTHER_SIDE_MS)]);
      if (!p.answers.mock)
        throw new Error(
          `seed ${this.seed} step ${step}: ${op.path} ${text.real} ` +
            `answered on etcd only: ${JSON.stringify(p.answers.real)}`,
        );
      return this.finish(p, false);
    }
    p.joinedAt = this.server.mock.revision;
    this.pending.push(p);
  }

  /** Until etcd has as many keys under the lock's or election's name as the mock. */
  private async joined(text: Record<Side, string>): Promise<void> {
    const name = nameOf(text);
    const want = this.server.mock.keys(`${name}/`).length;
    const deadline = Date.now() + 2_000;
    while (Date.now() < deadline) {
      const res = await this.readLine("real", name, { count_only: true });
      if (Number(res.count ?? 0) === want) return;
      await sleep(5);
    }
  }

  private finish(p: Pending, waited: boolean): void {
    const loose = waited && p.op.path === "/v3/lock/lock" ? ["revision"] : [];
    this.compare(p.step, p.op, p.text, p.answers.real!, p.answers.mock!, loose);
    this.learn(p.op, p.answers.real!, p.answers.mock!);
  }

  private async openStream(step: number, op: Op, text: Record<Side, string>): Promise<void> {
    // The body's requests as the mock got them, rendered now, at the revision text was rendered at.
    const parts = op.kind === "watch" && Array.isArray(op.body) ? op.body.map((b) => this.render(b, "mock")) : [];
    const abort = new AbortController();
    const collectors = {
      real: new Collector(
        fetch(`${this.base.real}${op.path}`, { method: "POST", body: text.real, signal: abort.signal }),
      ),
      mock: new Collector(
        fetch(`${this.base.mock}${op.path}`, { method: "POST", body: text.mock, signal: abort.signal }),
      ),
    };
    const stream = { step, op, text, abort, collectors, diverged: false, looked: 0, onEtcd: new Set<string>() };
    this.streams.push({ ...stream, early: new Set() });
    // etcd syncs a watcher that starts in the past on a 100 ms loop: let it catch up with the mock (which syncs
    // at once) before anything else is written, or its catch-up would batch later writes too.
    await sleep(150);
    const deadline = Date.now() + 3_000;
    while (collectors.real.lines.length < collectors.mock.lines.length && Date.now() < deadline) await sleep(5);
    if (parts.join("") === text.mock) await this.caughtUpBeforeCancel(this.streams[this.streams.length - 1]!, parts);
  }

  /**
   * etcd catches up a watch that starts in the past on its 100 ms sync loop, so when one body creates such a
   * watch and cancels it, the loop may run between the two and etcd sends the watch's history before its cancel
   * (seed 721937074 on 3.7, once in many runs); the mock syncs once the body is handled, after the cancel. Such
   * a watch's events on etcd are checked against the mock's catch-up for the same create on a stream of its own,
   * read now, before any later write or compaction: the events up to etcd's header revision must be the same.
   * The watches that pass are left out of the comparison (their control lines are not) and counted.
   */
  private async caughtUpBeforeCancel(s: Stream, parts: string[]): Promise<void> {
    const { real, mock } = s.collectors;
    const creates = parts.filter((p) => p.startsWith('{"create_request"'));
    const answers = mock.lines.filter((line) => resultOf(line).created === true);
    if (answers.length !== creates.length) return;
    for (const [i, answer] of answers.entries()) {
      const id = resultOf(answer).watch_id ?? "0";
      const of = (lines: Json[]) => lines.filter((line) => (resultOf(line).watch_id ?? "0") === id);
      const canceled = of(mock.lines).some((line) => resultOf(line).canceled === true && !resultOf(line).created);
      const etcdEvents = of(real.lines).filter(hasEvents);
      if (id === "-1" || !canceled || of(mock.lines).some(hasEvents) || etcdEvents.length === 0) continue;
      const create = JSON.parse(creates[i]!) as { create_request: Record<string, Json> };
      delete create.create_request.watch_id;
      const alone = new AbortController();
      const own = new Collector(
        fetch(`${this.base.mock}/v3/watch`, { method: "POST", body: JSON.stringify(create), signal: alone.signal }),
      );
      await sleep(100);
      alone.abort();
      const upTo = Number(resultOf(etcdEvents[etcdEvents.length - 1]!).header?.revision);
      const events = (lines: Json[]) => lines.flatMap((line) => (resultOf(line).events ?? []) as Json[]);
      const mockEvents = events(own.lines.filter(hasEvents)).filter(
        (e) => Number((e as { kv: { mod_revision: string } }).kv.mod_revision) <= upTo,
      );
      try {
        this.eq(events(etcdEvents), mockEvents, "", new Set());
      } catch {
        continue;
      }
      s.early.add(id);
      this.caughtUpEarly.push(`seed ${this.seed} step ${s.step}: watch ${id} of ${s.text.real}`);
    }
  }

  /**
   * After each request: waiting locks and campaigns that answered on one side get time to answer
   * on the other; streams catch up.
   */
  private async settle(lineMoved: boolean): Promise<void> {
    // A line moved: a waiter may be served. The mock answers it within a few ms if so.
    const deadline = Date.now() + 20;
    while (lineMoved && Date.now() < deadline && !this.pending.some((p) => p.answers.mock)) await sleep(2);
    for (const p of [...this.pending]) {
      if (!p.answers.real && !p.answers.mock) continue;
      await Promise.race([p.settled, sleep(OTHER_SIDE_MS)]);
      this.pending.splice(this.pending.indexOf(p), 1);
      if (p.answers.mock && !p.answers.real && (await this.lineEmptyOnEtcd(p))) {
        // etcd's waiter has nothing left to wait for, yet does not answer (seen in about one run in 15): that is
        // etcd's own watcher stalling, not a difference on the wire. Counted, not compared (docs/testing.md).
        this.stalled.push(`seed ${this.seed} step ${p.step}: ${p.op.path} ${p.text.real}`);
        p.abort.real.abort();
        continue;
      }
      if (!p.answers.real || !p.answers.mock) {
        const answer = JSON.stringify(p.answers.real ?? p.answers.mock);
        throw new Error(
          `seed ${this.seed} step ${p.step}: ${p.op.path} ${p.text.real} ` +
            `answered on ${p.answers.real ? "etcd" : "the mock"} only (${OTHER_SIDE_MS} ms later): ${answer}\n` +
            `  joined at ${p.joinedAt}; its line (key@create_revision) on etcd: ${await this.line("real", p)}; ` +
            `on the mock: ${await this.line("mock", p)}`,
        );
      }
      this.finish(p, true);
    }
    for (const s of this.streams) {
      if (s.diverged) continue;
      const deadline = Date.now() + 1_000;
      while (s.collectors.real.lines.length !== s.collectors.mock.lines.length && Date.now() < deadline) await sleep(5);
      if (s.collectors.real.lines.length !== s.collectors.mock.lines.length) s.diverged = true;
    }
    for (const s of this.streams) if (s.op.kind === "observe") await this.lookUpLeaders(s);
  }

  /**
   * Whether etcd had each leader the mock's observer reported, read at its revision now, before a later
   * compaction hides it: observerBehind needs it at the end.
   */
  private async lookUpLeaders(s: Stream): Promise<void> {
    const lines = s.collectors.mock.lines;
    for (; s.looked < lines.length; s.looked++) {
      const kv = kvOf(lines[s.looked]!);
      // Only a line with a leader has a name to read (an observe request with a bad name gets an error line).
      if (!kv) continue;
      const then = await this.readLine("real", nameOf(s.text), { revision: kv.mod_revision, keys_only: true });
      if ((then.kvs ?? []).some((k) => this.sameKv(k, kv))) s.onEtcd.add(kvKey(kv));
    }
  }

  /**
   * Streams: same status; observe lines in order (header revision loosely); watch events per watch in order,
   * control lines as a set, refusals (watch_id -1) without repeats.
   */
  async finishAll(): Promise<void> {
    await sleep(500);
    // etcd's gateway sends an observe stream's status with its first line, and etcd's observer reads the leader
    // through etcd's in-process client on its own schedule: under load that line came more than 3 s after the
    // request once (seed 661612607 on 3.5, not reproducible by seed). An observer etcd has not answered yet is
    // given up to LATE_OBSERVER_MS more; one that never answers still differs.
    const late = () =>
      this.streams.some(
        (s) =>
          s.op.kind === "observe" && s.collectors.real.status === "no answer" && s.collectors.mock.lines.length > 0,
      );
    // Past that, the comparison below says how they differ.
    await until("etcd answers every observer", LATE_OBSERVER_MS, () => !late(), 100).catch(() => {});
    for (const s of this.streams) {
      const realLines = s.collectors.real.lines;
      let mockLines =
        s.op.kind === "observe" ? this.observedAlso(realLines, s.collectors.mock.lines) : s.collectors.mock.lines;
      if (s.op.kind === "observe" && mockLines === s.collectors.mock.lines && realLines.length < mockLines.length) {
        const behind = await this.observerBehind(s);
        if (behind) {
          this.stalled.push(
            `seed ${this.seed} step ${s.step}: ${s.op.path} ${s.text.real} ` +
              `stopped at ${leaders(realLines.slice(-1))}; the mock went on to ${leaders(behind.beyond)}`,
          );
          mockLines = behind.upToEtcd;
        }
      }
      const realKept = realLines.filter((line) => !(hasEvents(line) && s.early.has(resultOf(line).watch_id ?? "0")));
      if (s.op.kind === "watch") mockLines = this.withoutLastCreate(s, realKept, mockLines);
      s.abort.abort();
      const real: Answer = { status: s.collectors.real.status, body: this.streamShape(s.op, realKept) };
      const mock: Answer = { status: s.collectors.mock.status, body: this.streamShape(s.op, mockLines) };
      try {
        this.compare(s.step, s.op, s.text, real, mock, s.op.kind === "observe" ? ["revision"] : []);
      } catch (err) {
        // The answers above are cut at 2,000 characters; an observer's whole story fits in a line each.
        if (s.op.kind !== "observe") throw err;
        throw new Error(
          `${(err as Error).message}\n  etcd's leaders: ${leaders(realLines)}\n  ` +
            `mock's leaders: ${leaders(s.collectors.mock.lines)}`,
        );
      }
    }
    for (const p of this.pending) {
      for (const side of SIDES) p.abort[side].abort();
      if (p.answers.real || p.answers.mock) this.finish(p, true);
    }
  }

  /**
   * An observer reads the new leader on its own schedule after each change, so etcd's may skip a candidate that
   * led only briefly (the test revokes a session lease at once) where the mock's, which reads at once, reports
   * it. The mock's lines that etcd's skipped are left out, provided etcd's lines come in the mock's order and
   * both end on the same leader; anything else still differs.
   */
  private observedAlso(real: Json[], mock: Json[]): Json[] {
    const kept = this.inMockOrder(real, mock);
    const endsAlike = kept && real.length > 0 && mock.length > 0 && kept[kept.length - 1] === mock[mock.length - 1];
    return endsAlike ? kept : mock;
  }

  /** The mock's lines that match etcd's, in order; undefined if one of etcd's lines has no match. */
  private inMockOrder(real: Json[], mock: Json[]): Json[] | undefined {
    const same = (a: Json, b: Json) => {
      try {
        this.eq(a, b, "", new Set(["revision"]));
        return true;
      } catch {
        return false;
      }
    };
    const kept: Json[] = [];
    let i = 0;
    for (const line of mock) {
      if (i < real.length && same(real[i]!, line)) {
        kept.push(line);
        i++;
      }
    }
    return i === real.length ? kept : undefined;
  }

  /**
   * etcd's observer stopped short: its stream is still open, its lines are the mock's in order, and either the
   * mock went on to the leader that etcd itself holds now (its first-created key under the name, same create and
   * mod revisions), or etcd holds no leader now and etcd had each leader the mock went on to (lookUpLeaders).
   * The first is etcd's internal watcher stalling, like a waiter left on an empty line (docs/testing.md); the
   * second may also be etcd's observer reading the line only after a short-lived leader was gone. Either way:
   * the mock's lines up to where etcd's stopped (to compare) and those after it; undefined for any other
   * difference.
   */
  private async observerBehind(s: Stream): Promise<{ upToEtcd: Json[]; beyond: Json[] } | undefined> {
    const { real, mock } = s.collectors;
    if (real.ended || real.lines.length === 0 || mock.lines.length === 0) return undefined;
    const upToEtcd = this.inMockOrder(real.lines, mock.lines);
    if (!upToEtcd) return undefined;
    const beyond = mock.lines.slice(mock.lines.indexOf(upToEtcd[upToEtcd.length - 1]!) + 1);
    const last = kvOf(mock.lines[mock.lines.length - 1]!);
    const now = (
      await this.readLine("real", nameOf(s.text), {
        sort_target: "CREATE",
        sort_order: "ASCEND",
        limit: 1,
        keys_only: true,
      })
    ).kvs?.[0];
    if (now) return last && this.sameKv(now, last) ? { upToEtcd, beyond } : undefined;
    const onEtcd = (line: Json) => {
      const kv = kvOf(line);
      return kv !== undefined && s.onEtcd.has(kvKey(kv));
    };
    return beyond.every(onEtcd) ? { upToEtcd, beyond } : undefined;
  }

  /**
   * etcd now and then never answers the last create of a body that holds several: neither its created line
   * nor its refusal comes, and no events of its watch (seen three times in about 20 runs, on both versions;
   * every line of the body's other creates arrived, and later events too; not reproducible by seed). When
   * etcd's stream is exactly the mock's without that create (its answer, the last of the mock's first control
   * lines, and every later line of its watch: events, or the cancel of a watch that starts before the
   * compaction), the create is left out on the mock's side too and the case is counted, at most 2 per run: a
   * mock that answered a create etcd refuses to hear would do so every time.
   */
  private withoutLastCreate(s: Stream, realLines: Json[], mockLines: Json[]): Json[] {
    const requests = Array.isArray(s.op.body) ? (s.op.body as Tpl[]) : [];
    if (requests.length < 2 || !requests.every((r) => r !== null && typeof r === "object" && "create_request" in r))
      return mockLines;
    const same = (lines: Json[]) => {
      try {
        this.eq(this.streamShape(s.op, realLines), this.streamShape(s.op, lines), "", new Set());
        return true;
      } catch {
        return false;
      }
    };
    if (same(mockLines)) return mockLines;
    const control = mockLines.filter((line) => !hasEvents(line));
    const answer = control[requests.length - 1];
    if (answer === undefined) return mockLines;
    const result = (answer as { result: { watch_id?: string; canceled?: boolean } }).result;
    const watch = result.canceled ? undefined : (result.watch_id ?? "0");
    const without = mockLines.filter((line) => {
      if (line === answer) return false;
      const { watch_id, canceled } = (line as { result: { watch_id?: string; canceled?: boolean } }).result;
      return !((hasEvents(line) || canceled === true) && watch !== undefined && (watch_id ?? "0") === watch);
    });
    if (!same(without)) return mockLines;
    this.unanswered.push(
      `seed ${this.seed} step ${s.step}: ${s.op.path} ${s.text.real}: ` +
        `etcd never answered the last create (the mock: ${canonical(answer)})`,
    );
    return without;
  }

  private streamShape(op: Op, lines: Json[]): Json {
    if (op.kind === "observe") return lines;
    const events: Record<string, Json[]> = {};
    const control: string[] = [];
    const refusals = new Set<string>();
    for (const line of lines) {
      const result = (line as { result?: { events?: Json; watch_id?: string } }).result;
      if (result?.events) (events[result.watch_id ?? "0"] ??= []).push(line);
      else if (result?.watch_id === "-1") refusals.add(canonical(line));
      else control.push(canonical(line));
    }
    return { events, control: [...control, ...refusals].sort() };
  }
}

/** A watch stream's line that carries events (any other is a control line: created, canceled, progress). */
function hasEvents(line: Json): boolean {
  return resultOf(line).events !== undefined;
}

/** A watch stream line's result (the fields read here). */
function resultOf(line: Json): {
  watch_id?: string;
  created?: boolean;
  canceled?: boolean;
  events?: Json;
  header?: { revision?: string };
} {
  return (line as { result?: ReturnType<typeof resultOf> }).result ?? {};
}

/** JSON with object keys sorted, so two encoders' field orders compare equal. */
function canonical(v: Json): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  return `{${Object.keys(v)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonical(v[k]!)}`)
    .join(",")}}`;
}

interface Lane {
  member: EtcdMember;
  server: MockEtcdServer;
  seed: number;
}

const lanes: Lane[] = [];
let version: EtcdVersion;

/** A member of its own (revisions in lockstep, compaction allowed), of the version this project tests, and its mock. */
async function openLane(seed: number, projectVersion: string): Promise<Lane> {
  const member = await startEtcd();
  try {
    const own = await etcdVersion(member.clientUrl);
    if (own.split(".").slice(0, 2).join(".") !== projectVersion.split(".").slice(0, 2).join(".")) {
      throw new Error(
        `the differential's member runs etcd ${own}, ` +
          `but this project tests ${projectVersion}: startEtcd() must start the project's version`,
      );
    }
    // The mock copies the member's identity: headers match, and lease IDs share their prefix.
    const list = (await (
      await fetch(`${member.clientUrl}/v3/cluster/member/list`, { method: "POST", body: "{}" })
    ).json()) as {
      header: { cluster_id: string; member_id: string };
      members: { name: string; peerURLs: string[] }[];
    };
    const server = await serveMockEtcd({
      version,
      clock: "wall",
      clusterId: list.header.cluster_id,
      memberId: list.header.member_id,
      name: list.members[0]!.name,
      peerUrls: list.members[0]!.peerURLs,
    });
    return { member, server, seed };
  } catch (err) {
    await member.stop();
    throw err;
  }
}

beforeAll(async () => {
  const projectVersion = inject("etcdRelease");
  version = inject("etcdVersion");
  for (let i = 0; i < LANES; i++) lanes.push(await openLane(SEED + i, projectVersion));
});

afterAll(async () => {
  await Promise.all(
    lanes.map(async (lane) => {
      await lane.server.close();
      await lane.member.stop();
    }),
  );
});

it(`random requests over HTTP: ` +
  `the mock answers as etcd does (seed ${SEED}, ${OPS} requests in ${LANES} lanes)`, async () => {
  const started = performance.now();
  const perLane = Math.ceil(OPS / LANES);
  const diffs = await Promise.all(
    lanes.map(async (lane) => {
      const diff = new Differential({ real: lane.member.clientUrl, mock: lane.server.url }, lane.server, lane.seed);
      const steps = fc.sample(ops(version), { seed: lane.seed, numRuns: perLane });
      for (const [i, op] of steps.entries()) await diff.run(i, op);
      await diff.finishAll();
      return diff;
    }),
  );
  const seen = new Map<string, number>();
  for (const d of diffs) for (const [tag, n] of d.seen) seen.set(tag, (seen.get(tag) ?? 0) + n);
  const compared = diffs.reduce((n, d) => n + d.compared, 0);
  const stalled = diffs.flatMap((d) => d.stalled);
  if (stalled.length > 0)
    console.warn(
      `etcd's own watcher stalled ${stalled.length} time(s) (a waiter on an empty line, ` +
        `or an observer short of the mock's leaders):\n  ${stalled.join("\n  ")}`,
    );
  const summary = [...seen]
    .sort()
    .map(([tag, n]) => `  ${tag}: ${n}`)
    .join("\n");
  const seconds = Math.round((performance.now() - started) / 1000);
  console.info(
    `mock-vs-etcd ${version}: ${compared} answers compared, ${perLane * LANES} requests, ` +
      `seeds ${SEED}..${SEED + LANES - 1}, ${seconds} s\n${summary}`,
  );
  expect(compared).toBeGreaterThanOrEqual(perLane * LANES * 0.95);
  // Rare by nature: more than a couple means the mock answers waiters etcd rightly keeps waiting.
  expect(stalled.length).toBeLessThanOrEqual(2);
  const unanswered = diffs.flatMap((d) => d.unanswered);
  if (unanswered.length > 0)
    console.warn(`etcd left ${unanswered.length} last create(s) unanswered:\n  ${unanswered.join("\n  ")}`);
  expect(unanswered.length).toBeLessThanOrEqual(2);
  const early = diffs.flatMap((d) => d.caughtUpEarly);
  if (early.length > 0)
    console.warn(`etcd caught up ${early.length} watch(es) before the body canceled them:\n  ${early.join("\n  ")}`);
  const displaced = diffs.flatMap((d) => [...d.displaced]);
  if (displaced.length > 0)
    console.warn(
      `etcd listed ${displaced.length} lease(s) away from the mock's place ` +
        `(expiries within the sides' timing): ${displaced.join(", ")}`,
    );
  // A swap moves two leases, a rotation three: a few such groups per run at most.
  expect(displaced.length).toBeLessThanOrEqual(6);
}, 900_000);
