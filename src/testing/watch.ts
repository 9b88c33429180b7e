import type { BinKey } from "./bytes.js";
import { encodeEvent, setInt, type Out } from "./encode.js";
import { inRange, type MvccStore, type StoreEvent } from "./store.js";

export interface WatchSpec {
  key: BinKey;
  end: BinKey;
  startRevision: number;
  prevKv: boolean;
  noPut: boolean;
  noDelete: boolean;
  progressNotify: boolean;
}

/** etcd sends at most this many revisions per catch-up message (watchBatchMaxRevs). */
const MAX_REVS_PER_BATCH = 1000;

const encoder = new TextEncoder();

/** One HTTP watch stream: the gateway's NDJSON body. A stream stays open after its watch is canceled, as etcd's does. */
class WatchStream {
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  private closed = false;
  readonly body: ReadableStream<Uint8Array>;
  /** Events with a revision below this were already sent (or predate the watch). */
  nextRevision = 0;
  spec: WatchSpec | undefined;

  constructor(private readonly onClose: (s: WatchStream) => void) {
    this.body = new ReadableStream<Uint8Array>({
      start: (c) => {
        this.controller = c;
      },
      cancel: () => this.finish(),
    });
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
    this.onClose(this);
  }
}

export class WatchHub {
  private readonly streams = new Set<WatchStream>();

  constructor(
    private readonly store: MvccStore,
    /** The full response header, at `revision` (default current; 0 = omitted, as on a compaction cancel). */
    private readonly header: (revision?: number) => Out,
  ) {}

  get openStreams(): number {
    return this.streams.size;
  }

  /** Opens a stream whose first line is `created` (or a refusal), replaying history from start_revision. */
  open(spec: WatchSpec, signal: AbortSignal | undefined, refusal: string | undefined): ReadableStream<Uint8Array> {
    const stream = new WatchStream((s) => this.streams.delete(s));
    this.streams.add(stream);
    if (signal) {
      const onAbort = () => stream.fail(signal.reason ?? new DOMException("This operation was aborted", "AbortError"));
      if (signal.aborted) queueMicrotask(onAbort);
      else signal.addEventListener("abort", onAbort, { once: true });
    }
    const emptyRange = spec.end !== "" && spec.end !== "\0" && spec.key >= spec.end;
    const cancelReason = refusal ?? (emptyRange ? "mvcc: watcher range is empty" : undefined);
    if (cancelReason !== undefined) {
      stream.send({ ...this.headerOut(), watch_id: "-1", created: true, canceled: true, cancel_reason: cancelReason });
      return stream.body;
    }
    stream.send({ ...this.headerOut(), created: true });
    const current = this.store.revision;
    if (spec.startRevision > 0 && spec.startRevision < this.store.compactRevision) {
      const out: Out = { header: this.header(0), canceled: true };
      setInt(out, "compact_revision", this.store.compactRevision);
      stream.send(out);
      return stream.body;
    }
    stream.spec = spec;
    stream.nextRevision = spec.startRevision > 0 ? spec.startRevision : current + 1;
    if (stream.nextRevision <= current) this.replay(stream, current);
    return stream.body;
  }

  private headerOut(revision?: number): Out {
    return { header: this.header(revision) };
  }

  /** Catch-up: all past events in one message (up to 1000 revisions each), headed by the current revision. */
  private replay(stream: WatchStream, current: number): void {
    let batch: Out[] = [];
    let revs = 0;
    for (const entry of this.store.log) {
      if (entry.revision < stream.nextRevision) continue;
      const events = this.select(stream.spec!, entry.events);
      if (events.length === 0) continue;
      batch.push(...events);
      if (++revs === MAX_REVS_PER_BATCH) {
        stream.send({ ...this.headerOut(current), events: batch });
        batch = [];
        revs = 0;
      }
    }
    if (batch.length > 0) stream.send({ ...this.headerOut(current), events: batch });
    stream.nextRevision = current + 1;
  }

  /** Called on every commit. Delivery waits for a microtask, so it never happens inside the writer's request. */
  notify(revision: number, events: readonly StoreEvent[]): void {
    queueMicrotask(() => {
      for (const stream of this.streams) {
        if (!stream.spec || revision < stream.nextRevision) continue;
        stream.nextRevision = revision + 1;
        const selected = this.select(stream.spec, events);
        // etcd sends nothing when filters removed every event.
        if (selected.length > 0) stream.send({ ...this.headerOut(revision), events: selected });
      }
    });
  }

  /** A progress notification: header only, at the current revision. */
  progress(): void {
    for (const stream of this.streams) {
      if (stream.spec?.progressNotify) stream.send(this.headerOut());
    }
  }

  failAll(reason: () => unknown): void {
    for (const stream of [...this.streams]) stream.fail(reason());
  }

  private select(spec: WatchSpec, events: readonly StoreEvent[]): Out[] {
    return events
      .filter((ev) => inRange(ev.kv.key, spec.key, spec.end))
      .filter((ev) => !(ev.type === "PUT" ? spec.noPut : spec.noDelete))
      .map((ev) => encodeEvent(ev, spec.prevKv));
  }
}
