import type { BinKey } from "./wire/bytes.js";
import type { Dialect } from "./wire/dialect.js";
import { encodeKv, setInt, type Out } from "./wire/encode.js";
import { inRange, type KeyValue, type MvccStore, type StoreEvent } from "./store.js";

export interface WatchSpec {
  key: BinKey;
  end: BinKey;
  startRevision: number;
  prevKv: boolean;
  noPut: boolean;
  noDelete: boolean;
  progressNotify: boolean;
  /** 0 = let the stream pick the next free ID. */
  watchId: bigint;
}

/** etcd sends at most this many revisions per catch-up message (watchBatchMaxRevs). */
const MAX_REVS_PER_BATCH = 1000;

const encoder = new TextEncoder();

class Watcher {
  /** Events below this revision were sent already (or predate the watch). */
  nextRevision: number;
  /** Caught up with the store; until then live events wait for the catch-up (etcd's unsynced watcher group). */
  synced: boolean;
  /** etcd's per-watch progress flag: a periodic notification goes out only if no events went out since the last one. */
  progressDue = true;
  /** Canceled for compaction: sends nothing more, but keeps its ID until a cancel_request, as in etcd. */
  compacted = false;

  constructor(
    readonly id: bigint,
    readonly spec: WatchSpec,
    current: number,
  ) {
    this.synced = spec.startRevision === 0 || spec.startRevision > current;
    this.nextRevision = spec.startRevision === 0 ? current + 1 : spec.startRevision;
  }

  /** Whether progress notifications wait for it (3.6: while its start is ahead of the store). */
  holdsProgress(current: number, waitsForFutureStarts: boolean): boolean {
    return !this.synced || this.compacted || (waitsForFutureStarts && this.spec.startRevision > current);
  }

  /** Whether its catch-up is canceled by this compaction (etcd leaves it out of its batch's start). */
  startsBefore(compactRevision: number): boolean {
    return this.nextRevision < compactRevision;
  }
}

/** One HTTP watch stream: the gateway's NDJSON body, and the watchers created on it. */
export class WatchStream {
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  private closed = false;
  private nextId = 0n;
  readonly watchers = new Map<bigint, Watcher>();
  readonly body: ReadableStream<Uint8Array>;

  constructor(
    private readonly hub: WatchHub,
    private readonly onClose: (s: WatchStream) => void,
  ) {
    this.body = new ReadableStream<Uint8Array>({
      start: (c) => {
        this.controller = c;
      },
      cancel: () => this.finish(),
    });
  }

  get isClosed(): boolean {
    return this.closed;
  }

  send(result: Out): void {
    if (!this.closed) this.controller.enqueue(encoder.encode(`${JSON.stringify({ result })}\n`));
  }

  /** Errors the body as a dropped connection or an aborted fetch would. */
  fail(reason: unknown): void {
    if (this.closed) return;
    this.controller.error(reason);
    this.finish();
  }

  private finish(): void {
    this.closed = true;
    this.watchers.clear();
    this.onClose(this);
  }

  /** A create_request; `refusal` is the auth check's cancel reason, if it failed. */
  create(spec: WatchSpec, refusal: string | undefined): void {
    const hub = this.hub;
    const wsrev = hub.store.revision;
    const refuse = (reason: string) =>
      this.send({ header: hub.header(wsrev), watch_id: "-1", created: true, canceled: true, cancel_reason: reason });
    if (refusal !== undefined) return refuse(refusal);
    if (spec.end !== "" && spec.end !== "\0" && spec.key >= spec.end) return refuse("mvcc: watcher range is empty");
    let id = spec.watchId;
    if (id === 0n) {
      while (this.watchers.has(this.nextId)) this.nextId++;
      id = this.nextId++;
    } else if (this.watchers.has(id)) {
      return refuse("mvcc: duplicate watch ID provided on the WatchStream");
    }
    const watcher = new Watcher(id, spec, wsrev);
    this.watchers.set(id, watcher);
    const created: Out = { header: hub.header(wsrev) };
    setInt(created, "watch_id", id);
    created.created = true;
    this.send(created);
    if (!watcher.synced) hub.scheduleSync();
  }

  /** A cancel_request: answered only when the watch exists. */
  cancel(id: bigint): void {
    if (!this.watchers.delete(id)) return;
    const out: Out = { header: this.hub.header() };
    setInt(out, "watch_id", id);
    out.canceled = true;
    this.send(out);
  }

  /**
   * A progress_request: the current revision, for no watch in particular (watch_id -1). 3.5 answers only when
   * the stream has watchers and every one is synced (one canceled for compaction has left etcd's synced group for
   * good); 3.6 also waits for those that start in the future.
   */
  progressRequest(): void {
    const { progressNeedsSyncedWatchers, progressWaitsForFutureStarts } = this.hub.dialect;
    const current = this.hub.store.revision;
    const watchers = [...this.watchers.values()];
    const held = watchers.length === 0 || watchers.some((w) => w.holdsProgress(current, progressWaitsForFutureStarts));
    if (progressNeedsSyncedWatchers && held) return;
    this.send({ header: this.hub.header(), watch_id: "-1" });
  }

  /** Sends one revision's events to a watcher (filtered; nothing when every event was filtered out). */
  deliver(w: Watcher, events: readonly StoreEvent[], headerRevision: number): void {
    const selected = this.hub.select(w.spec, events);
    if (selected.length === 0) return;
    const out: Out = { header: this.hub.header(headerRevision) };
    setInt(out, "watch_id", w.id);
    out.events = selected;
    this.send(out);
    w.progressDue = false;
  }

  /**
   * Catch-up for an unsynced watcher: compacted → canceled; else history from `batchStart` (the lowest start of
   * the watchers synced with it) in batches of 1000 revisions.
   */
  sync(w: Watcher, batchStart: number): void {
    const hub = this.hub;
    const current = hub.store.revision;
    if (w.startsBefore(hub.store.compactRevision)) {
      const out: Out = { header: hub.header(0) };
      setInt(out, "watch_id", w.id);
      // etcd marks the answer canceled by its compact revision being non-zero: after a compaction at revision 0
      // (a fresh member), a watch from before it gets a bare header and nothing more.
      if (hub.store.compactRevision !== 0) out.canceled = true;
      setInt(out, "compact_revision", hub.store.compactRevision);
      this.send(out);
      w.compacted = true;
      w.synced = true;
      return;
    }
    let batch: Out[] = [];
    let revs = 0;
    const flush = () => {
      const out: Out = { header: hub.header(current) };
      setInt(out, "watch_id", w.id);
      out.events = batch;
      this.send(out);
      w.progressDue = false;
      batch = [];
      revs = 0;
    };
    for (const entry of hub.store.log) {
      // etcd reads one batch's history from its lowest start revision, as an unsigned key: a negative start
      // reads nothing, for every watcher synced with it (fixed upstream after 3.6 by rejecting it, etcd afeab20ac).
      if (batchStart < 0) break;
      if (entry.revision < w.nextRevision || entry.revision > current) continue;
      const events = hub.select(w.spec, entry.events);
      if (events.length === 0) continue;
      batch.push(...events);
      if (++revs === MAX_REVS_PER_BATCH) flush();
    }
    if (batch.length > 0) flush();
    w.nextRevision = current + 1;
    w.synced = true;
  }
}

/** A server-internal watcher (v3lock, v3election): every commit, after the watch streams got theirs. */
export type CommitListener = (revision: number, events: readonly StoreEvent[]) => void;

export class WatchHub {
  private readonly streams = new Set<WatchStream>();
  private readonly listeners = new Set<CommitListener>();
  private syncQueued = false;

  constructor(
    readonly store: MvccStore,
    /** The full response header, at `revision` (default current; 0 = omitted, as on a compaction cancel). */
    readonly header: (revision?: number) => Out,
    readonly dialect: Dialect,
  ) {}

  get openStreams(): number {
    return this.streams.size;
  }

  /** A new HTTP watch stream; it ends when the client goes away (signal) or the body is canceled. */
  open(signal: AbortSignal | undefined): WatchStream {
    const stream = new WatchStream(this, (s) => this.streams.delete(s));
    this.streams.add(stream);
    if (signal) {
      const onAbort = () => stream.fail(signal.reason ?? new DOMException("This operation was aborted", "AbortError"));
      if (signal.aborted) queueMicrotask(onAbort);
      else signal.addEventListener("abort", onAbort, { once: true });
    }
    return stream;
  }

  /**
   * etcd syncs watchers that start in the past on a background loop, after the create response and after any
   * control response already queued; the mock does it once the current request (or body) has been handled.
   */
  scheduleSync(): void {
    if (this.syncQueued) return;
    this.syncQueued = true;
    queueMicrotask(() => {
      this.syncQueued = false;
      // One batch, as etcd's syncWatchers: the unsynced watchers of every stream, read from the lowest start
      // among those not canceled for compaction (its watcherGroup.chooseAll).
      const batch: [WatchStream, Watcher][] = [];
      for (const stream of this.streams) {
        for (const w of stream.watchers.values()) if (!w.synced) batch.push([stream, w]);
      }
      let batchStart = Infinity;
      for (const [, w] of batch) {
        if (!w.startsBefore(this.store.compactRevision)) batchStart = Math.min(batchStart, w.nextRevision);
      }
      for (const [stream, w] of batch) stream.sync(w, batchStart);
    });
  }

  /** Called on every commit. Delivery waits for a microtask, so it never happens inside the writer's request. */
  notify(revision: number, events: readonly StoreEvent[]): void {
    queueMicrotask(() => {
      for (const stream of this.streams) {
        for (const w of stream.watchers.values()) {
          if (!w.synced || w.compacted || revision < w.nextRevision) continue;
          w.nextRevision = revision + 1;
          stream.deliver(w, events, revision);
        }
      }
      for (const listener of [...this.listeners]) listener(revision, events);
    });
  }

  /** Subscribes to commits; returns the unsubscribe. */
  listen(listener: CommitListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The periodic progress notification (etcd's progress report interval) to each synced watch that asked for it. */
  progressTick(): void {
    const current = this.store.revision;
    for (const stream of this.streams) {
      for (const w of stream.watchers.values()) {
        if (!w.spec.progressNotify || w.compacted) continue;
        if (w.progressDue && !w.holdsProgress(current, this.dialect.progressWaitsForFutureStarts)) {
          const out: Out = { header: this.header() };
          setInt(out, "watch_id", w.id);
          stream.send(out);
        }
        w.progressDue = true;
      }
    }
  }

  failAll(reason: () => unknown): void {
    for (const stream of [...this.streams]) stream.fail(reason());
  }

  /**
   * Filters, then encodes; prev_kv is the key at the revision before the event, as etcd
   * reads it (none if compacted).
   */
  select(spec: WatchSpec, events: readonly StoreEvent[]): Out[] {
    return events
      .filter((ev) => inRange(ev.kv.key, spec.key, spec.end))
      .filter((ev) => !(ev.type === "PUT" ? spec.noPut : spec.noDelete))
      .map((ev) => {
        const out: Out = {};
        if (ev.type === "DELETE") out.type = "DELETE";
        out.kv = encodeKv(ev.kv);
        const isCreate = ev.type === "PUT" && ev.kv.version === 1;
        if (spec.prevKv && !isCreate) {
          const prev: KeyValue | undefined = this.store.getAt(ev.kv.key, ev.kv.modRevision - 1);
          if (prev) out.prev_kv = encodeKv(prev);
        }
        return out;
      });
  }
}
