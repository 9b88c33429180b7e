// What the judge sees while the chaos runs: every change to the lock's keys (one raw watch per member,
// merged, each event timed by whichever stream delivered it first) and every raft leader change (each
// member's status, polled). Straight to the members, never through the fault proxies.
import { decodeKv, memberStatus, type WireKv } from "../support/raw-gateway.ts";
import { sleep, wallNow } from "../support/time.ts";
import { b64, prefixEnd } from "../support/wire.ts";

export interface LockEvent {
  type: "put" | "delete";
  key: string;
  revision: number;
  /** The key's create revision: for a delete, that of the incarnation deleted. */
  createRevision: number;
  lease: string;
  /** Earliest time any stream delivered it (epoch ms, high resolution). */
  t: number;
}

export interface LeaderChange {
  /** When the poll first saw the new term: at most one poll period after the new leader took over. */
  t: number;
  term: number;
  leaderId: string;
}

/** Revisions [from, to] whose lock events a stream delivered completely. */
export interface Interval {
  from: number;
  to: number;
}

const STATUS_EVERY_MS = 250;
const STALL_CHECK_EVERY_MS = 500;
// A stream that is behind the others and has heard nothing for this long is on a stuck member: reopen it.
const STALE_STREAM_MS = 2_000;
const OPEN_TIMEOUT_MS = 3_000;

class Stream {
  next: number;
  /** The last revision whose lock events this stream has delivered (all of them, from its interval's start). */
  last: number;
  readonly intervals: Interval[] = [];
  lastDataAt = performance.now();
  #controller: AbortController | undefined;
  #stopped = false;
  readonly #endpoint: string;
  readonly #prefix: string;
  readonly #record: (event: LockEvent) => void;
  readonly #done: Promise<void>;

  constructor(endpoint: string, prefix: string, from: number, record: (event: LockEvent) => void) {
    this.#endpoint = endpoint;
    this.#prefix = prefix;
    this.#record = record;
    this.next = from;
    this.last = from - 1;
    this.intervals.push({ from, to: from - 1 });
    this.#done = this.#run();
  }

  /** Aborts the open request; the loop reopens from `next`. */
  kick(): void {
    this.#controller?.abort();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.kick();
    await this.#done;
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      try {
        await this.#follow();
      } catch {
        // The member is down, paused or was kicked: reopen after a pause.
      }
      if (!this.#stopped) await sleep(200);
    }
  }

  async #follow(): Promise<void> {
    const controller = new AbortController();
    this.#controller = controller;
    const opening = setTimeout(() => controller.abort(), OPEN_TIMEOUT_MS);
    this.lastDataAt = performance.now();
    try {
      const response = await fetch(`${this.#endpoint}/v3/watch`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          create_request: {
            key: b64(this.#prefix),
            range_end: prefixEnd(this.#prefix),
            start_revision: String(this.next),
            prev_kv: true,
          },
        }),
        signal: controller.signal,
      });
      clearTimeout(opening);
      if (response.status !== 200 || response.body === null) throw new Error(`watch: HTTP ${response.status}`);
      const decoder = new TextDecoder();
      let buffered = "";
      const reader = response.body.getReader();
      for (;;) {
        const { done, value: chunk } = await reader.read();
        if (done) return;
        this.lastDataAt = performance.now();
        buffered += decoder.decode(chunk, { stream: true });
        let newline: number;
        while ((newline = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, newline).trim();
          buffered = buffered.slice(newline + 1);
          if (line.length > 0 && this.#line(line) === "restart") return;
        }
      }
    } finally {
      clearTimeout(opening);
      controller.abort();
    }
  }

  #line(line: string): "restart" | undefined {
    const message = JSON.parse(line) as {
      result?: {
        canceled?: boolean;
        compact_revision?: string;
        events?: Array<{ type?: string; kv?: WireKv; prev_kv?: WireKv }>;
      };
      error?: unknown;
    };
    const result = message.result;
    if (result === undefined) return "restart";
    if (result.canceled) {
      const compacted = Number(result.compact_revision ?? 0);
      if (compacted > this.next) {
        // History we had not read yet is gone: this stream has a gap; the others cover it (see Monitor).
        this.next = compacted;
        this.last = compacted - 1;
        this.intervals.push({ from: compacted, to: compacted - 1 });
      }
      return "restart";
    }
    const t = wallNow();
    for (const event of result.events ?? []) {
      const kv = decodeKv(event.kv ?? {});
      const prev = event.prev_kv === undefined ? undefined : decodeKv(event.prev_kv);
      const isDelete = event.type === "DELETE";
      this.#record({
        type: isDelete ? "delete" : "put",
        key: kv.key,
        revision: kv.modRevision,
        createRevision: isDelete ? (prev?.createRevision ?? 0) : kv.createRevision,
        lease: isDelete ? (prev?.lease ?? "0") : kv.lease,
        t,
      });
      // Events come in revision order: everything before this one has been delivered.
      this.last = Math.max(this.last, kv.modRevision);
      this.next = this.last + 1;
      this.intervals[this.intervals.length - 1]!.to = this.last;
    }
    return undefined;
  }
}

export class Monitor {
  readonly #endpoints: readonly string[];
  readonly #streams: Stream[];
  readonly #events = new Map<string, LockEvent>();
  readonly #leaders: LeaderChange[] = [];
  readonly #startRevision: number;
  #term = 0;
  #leaderId = "0";
  #revision = 0;
  readonly #memberIds = new Map<string, number>();
  readonly #timers: Array<ReturnType<typeof setInterval>> = [];

  constructor(endpoints: readonly string[], prefix: string, startRevision: number) {
    this.#endpoints = endpoints;
    this.#startRevision = startRevision;
    const record = (event: LockEvent) => {
      const id = `${event.revision}|${event.type}|${event.key}`;
      const seen = this.#events.get(id);
      if (seen === undefined || event.t < seen.t) this.#events.set(id, event);
    };
    this.#streams = endpoints.map((endpoint) => new Stream(endpoint, prefix, startRevision, record));
    this.#timers.push(setInterval(() => void this.#pollStatus(), STATUS_EVERY_MS));
    this.#timers.push(setInterval(() => this.#kickStale(), STALL_CHECK_EVERY_MS));
  }

  async stop(): Promise<void> {
    for (const timer of this.#timers) clearInterval(timer);
    await Promise.all(this.#streams.map((s) => s.stop()));
  }

  /** Lock events so far, in revision order. */
  events(): LockEvent[] {
    return [...this.#events.values()].sort((a, b) => a.revision - b.revision || a.key.localeCompare(b.key));
  }

  leaderChanges(): LeaderChange[] {
    return [...this.#leaders];
  }

  /** The member index (in the endpoints given) that the latest status poll named leader, if known. */
  leaderIndex(): number | undefined {
    return this.#memberIds.get(this.#leaderId);
  }

  /** The highest store revision any status poll has seen. */
  clusterRevision(): number {
    return this.#revision;
  }

  /**
   * A revision below which every stream still open has delivered everything: compacting there never cuts
   * a live stream, and a stream that was down gets its gap covered by those that were not.
   */
  safeCompactRevision(): number {
    const live = this.#streams.filter((s) => performance.now() - s.lastDataAt < STALE_STREAM_MS);
    if (live.length < 2) return 0;
    return Math.min(...live.map((s) => s.last));
  }

  /** Whether, merged, the streams delivered every lock event from the start through `revision`. */
  covers(revision: number): boolean {
    const intervals = this.#streams
      .flatMap((s) => s.intervals)
      .filter((i) => i.to >= i.from)
      .sort((a, b) => a.from - b.from);
    let reached = this.#startRevision - 1;
    for (const interval of intervals) {
      if (interval.from > reached + 1) break;
      reached = Math.max(reached, interval.to);
    }
    return reached >= revision;
  }

  /** Waits until the merged streams cover `revision`, or `timeoutMs` passes. */
  async waitCovered(revision: number, timeoutMs: number): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    while (!this.covers(revision)) {
      if (performance.now() > deadline) return false;
      await sleep(50);
    }
    return true;
  }

  async #pollStatus(): Promise<void> {
    await Promise.all(
      this.#endpoints.map(async (endpoint, index) => {
        try {
          const status = await memberStatus(endpoint, STATUS_EVERY_MS * 2);
          this.#memberIds.set(status.memberId, index);
          this.#revision = Math.max(this.#revision, status.revision);
          if (status.raftTerm > this.#term && status.leader !== "0") {
            if (this.#term !== 0) this.#leaders.push({ t: wallNow(), term: status.raftTerm, leaderId: status.leader });
            this.#term = status.raftTerm;
            this.#leaderId = status.leader;
          } else if (status.raftTerm === this.#term && status.leader !== "0") {
            this.#leaderId = status.leader;
          }
        } catch {
          // Down or paused: the others answer.
        }
      }),
    );
  }

  #kickStale(): void {
    const newest = Math.max(...this.#streams.map((s) => s.last));
    for (const stream of this.#streams) {
      if (stream.last < newest && performance.now() - stream.lastDataAt > STALE_STREAM_MS) stream.kick();
    }
  }
}
