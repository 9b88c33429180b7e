import type { EtcdClient } from "../../api/client.js";
import type { ResponseHeader } from "../../api/codec.js";
import { aborted, unavailable } from "../../errors/catalogue.js";
import { backgroundTimer } from "../../gateway/signals.js";
import { isEtcdError } from "../../errors/etcd-error.js";
import { moved } from "./read.js";
import type { Incarnation, LineReader, Standing } from "./standing.js";

/**
 * How long a line's watch stays open after its last waiter left. On a hot lock the next waiter of this
 * process comes within milliseconds and finds the stream open and synced; a lock gone quiet closes it. Kept
 * short: the open stream keeps a Node process from exiting until then.
 */
const LINGER_MS = 250;

/**
 * How many of the latest deletes a line's watch remembers. A waiter subscribes a little after its own read
 * of the line; a hot lock's handoffs often land in between, and finding them here spares it a read.
 */
const RECENT_DELETES = 64;

/** The delete of the key a waiter waits for, as the line's watch saw it. */
export interface Deleted {
  /** The delete event's header. */
  header: ResponseHeader;
  /**
   * The deleted key was, as this process knew it, the line's first (its holder): a waiter right behind it is
   * first now. Known when a waiter of this process became first with that key (see `markFirst`).
   */
  wasFirst: boolean;
}

/** What a waiter is told: the delete of the key it waits for, or the end of the watch. */
export interface DeleteWait {
  /**
   * Whether the waiter must read the line once: the stream had gone past the waiter's own read when it
   * subscribed, and the deletes in between are no longer in the stream's recent history.
   */
  readonly gap: Promise<boolean>;
  /** Resolves with the delete (at once if it is in the recent history). */
  readonly deleted: Promise<Deleted>;
  /** Unsubscribes (the wait is over or abandoned). */
  cancel(): void;
}

/** A delete the stream delivered, kept for waiters that subscribe after it. */
interface RecentDelete {
  key: string;
  revision: number;
  header: ResponseHeader;
  /** The create revision of the incarnation deleted here if it was known first, else 0. */
  firstRevision: number;
}

interface Subscriber {
  /** The key waited for, and the create revision of the incarnation the waiter saw. */
  key: string;
  createRevision: number;
  /** The waiter's read of the line: a delete at or below it is an older incarnation's, not this one's. */
  read: number;
  deleted: (deleted: Deleted) => void;
  failed: (error: unknown) => void;
}

/**
 * One watch stream per line (the keys under the predecessor's parent, `<name>/`) and client, shared by the
 * waiters of this process in that line. Each waiter still waits only for its own predecessor's delete, so a
 * release wakes one waiter; but a handoff no longer opens and tears down a connection (a watch's connection
 * cannot be reused once it is aborted mid-stream), which was most of the client's work per handoff on a hot
 * lock, and etcd keeps one watcher per process instead of one per waiter.
 */
export class SharedWatch {
  readonly #subscribers = new Map<string, Set<Subscriber>>();
  readonly #controller = new AbortController();
  readonly #created: Promise<number>;
  /** The revision through which deletes have been handed to subscribers; 0 until the watch is created. */
  #seen = 0;
  /** The latest deletes, oldest first: every delete above `#recentFrom` is here. */
  readonly #recent: RecentDelete[] = [];
  #recentFrom = 0;
  /**
   * The line's first key (its holder) when a waiter of this process became first: only one key is first at a
   * time, and it stays first until it is deleted (a key that joins later has a higher create revision).
   */
  #first: Incarnation | undefined;
  #linger: ReturnType<typeof setTimeout> | undefined;
  #endpoint: string | undefined;
  #failure: unknown;
  readonly #leave: () => void;

  /** @internal Opens the stream at once; `leave` forgets it when it closes. */
  constructor(client: EtcdClient, prefix: string, idleTimeout: number, leave: () => void) {
    this.#leave = leave;
    let created!: (revision: number) => void;
    let failed!: (error: unknown) => void;
    this.#created = new Promise<number>((resolve, reject) => {
      created = resolve;
      failed = reject;
    });
    this.#created.catch(() => {});
    const onCreated = (revision: number, endpoint: string) => {
      this.#endpoint = endpoint;
      // Reopened streams resume from the last delivered revision: only the first creation sets the start.
      if (this.#seen === 0) {
        this.#seen = this.#recentFrom = revision;
        created(revision);
      }
    };
    this.#follow(client, prefix, idleTimeout, onCreated).catch((error: unknown) => {
      failed(error);
      this.#fail(error);
    });
    // Closes unless a waiter subscribes: nothing may keep a stream open that nobody listens to.
    this.#idle();
  }

  /** The endpoint its stream was last created on, once it was. */
  get endpoint(): string | undefined {
    return this.#endpoint;
  }

  /**
   * Records that `first` is the line's first key: a waiter of this process found itself first. The waiter
   * behind it then needs no read when it is deleted (each waiter of a hot lock in one process would
   * otherwise read the line once per handoff, on the handoff's path).
   */
  markFirst(first: Incarnation): void {
    this.#first = first;
  }

  /**
   * Subscribes to the delete of `predecessor` (the incarnation the waiter's read of the line at revision
   * `read` showed); `signal` abandons the wait (ABORTED).
   */
  waitForDelete(predecessor: Incarnation, read: number, signal: AbortSignal): DeleteWait {
    const { key, createRevision } = predecessor;
    if (this.#failure !== undefined) {
      const failure = Promise.reject(this.#failure);
      failure.catch(() => {});
      return { gap: failure, deleted: failure, cancel: () => {} };
    }
    if (this.#seen > read && this.#recentFrom <= read) {
      // Deletes since the waiter's read went by before it came, and all of them are remembered.
      const gone = this.#recent.find((d) => d.key === key && d.revision > read);
      if (gone !== undefined) {
        const deleted = {
          header: gone.header,
          wasFirst: gone.firstRevision !== 0 && gone.firstRevision === createRevision,
        };
        return { gap: Promise.resolve(false), deleted: Promise.resolve(deleted), cancel: () => {} };
      }
    }
    if (this.#linger !== undefined) clearTimeout(this.#linger);
    this.#linger = undefined;
    let subscriber!: Subscriber;
    const deleted = new Promise<Deleted>((resolve, reject) => {
      subscriber = { key, createRevision, read, deleted: resolve, failed: reject };
    });
    deleted.catch(() => {});
    const cancel = () => {
      signal.removeEventListener("abort", onAbort);
      this.#unsubscribe(subscriber);
    };
    const onAbort = () => {
      cancel();
      subscriber.failed(aborted(signal.reason));
    };
    let keys = this.#subscribers.get(key);
    if (keys === undefined) this.#subscribers.set(key, (keys = new Set()));
    keys.add(subscriber);
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    const gap =
      this.#seen > 0
        ? Promise.resolve(this.#seen > read && this.#recentFrom > read)
        : this.#created.then((revision) => revision > read);
    // A waiter that gives up before creation must not wait for it: its abort rejects `gap` too.
    const gapOrAbort = Promise.race([gap, deleted.then(() => false)]);
    gapOrAbort.catch(() => {});
    return { gap: gapOrAbort, deleted, cancel };
  }

  async #follow(
    client: EtcdClient,
    prefix: string,
    idleTimeout: number,
    onCreated: (revision: number, endpoint: string) => void,
  ): Promise<void> {
    const query = { prefix, noPut: true, idleTimeout, onCreated, signal: this.#controller.signal };
    for await (const batch of client.watch(query)) {
      for (const event of batch.events) {
        const key = event.kv.key;
        const revision = event.kv.modRevision;
        const first = this.deleted(key, revision, batch.header);
        this.#remember({ key, revision, header: batch.header, firstRevision: first });
      }
      // One revision per batch: a waiter that subscribes from now on finds this batch in #recent.
      if (batch.events.length > 0) this.#seen = Math.max(this.#seen, batch.events[0]!.kv.modRevision);
      if (this.#subscribers.size === 0) this.#idle();
    }
    throw unavailable("the line's watch ended");
  }

  /**
   * `key` was deleted at `revision` (`header`): its waiters whose read showed it wake. Told by the stream, or
   * first by a release of this client, whose answer comes before the stream's event: a delete etcd answered is
   * as certain as its event, and the event then finds nobody left to wake. Returns the create revision of the
   * incarnation deleted here if it was marked first, else 0.
   */
  deleted(key: string, revision: number, header: ResponseHeader): number {
    // The first key leaves the line here, unless the mark is a later incarnation's (a read can run ahead of the
    // stream).
    const first = this.#first?.key === key && this.#first.createRevision < revision ? this.#first.createRevision : 0;
    if (first !== 0) this.#first = undefined;
    const waiting = this.#subscribers.get(key);
    if (waiting === undefined) return first;
    for (const subscriber of waiting) {
      // A waiter whose read already showed a later incarnation of the key waits for that one's delete.
      if (subscriber.read >= revision) continue;
      waiting.delete(subscriber);
      subscriber.deleted({ header, wasFirst: first !== 0 && first === subscriber.createRevision });
    }
    if (waiting.size === 0) this.#subscribers.delete(key);
    return first;
  }

  #remember(gone: RecentDelete): void {
    this.#recent.push(gone);
    if (this.#recent.length > RECENT_DELETES) this.#recentFrom = this.#recent.shift()!.revision;
  }

  #unsubscribe(subscriber: Subscriber): void {
    const keys = this.#subscribers.get(subscriber.key);
    if (keys?.delete(subscriber) && keys.size === 0) this.#subscribers.delete(subscriber.key);
    if (this.#subscribers.size === 0) this.#idle();
  }

  /** No waiter left: close after a while unless one comes. */
  #idle(): void {
    if (this.#linger !== undefined || this.#failure !== undefined) return;
    this.#linger = backgroundTimer(() => {
      this.#linger = undefined;
      if (this.#subscribers.size === 0) this.#fail(aborted("the line's watch was idle"));
    }, LINGER_MS);
  }

  /** Ends the watch for good: its subscribers learn why, and the next waiter opens a new one. */
  #fail(error: unknown): void {
    if (this.#failure !== undefined) return;
    this.#failure = error;
    if (this.#linger !== undefined) clearTimeout(this.#linger);
    this.#linger = undefined;
    this.#leave();
    this.#controller.abort();
    const subscribers = [...this.#subscribers.values()].flatMap((keys) => [...keys]);
    this.#subscribers.clear();
    for (const subscriber of subscribers) subscriber.failed(error);
  }
}

/**
 * How a waiter waits on its line's shared watch: for its predecessor's delete, then one read of where it stands,
 * unless it was right behind the holder (the join or a read showed it, or a waiter of this process found that
 * key first, in a `plain` line where each key waits for the next older one): that delete makes it first, with
 * no read. Its own key is trusted as the lease is, and fenced writes check it on the server anyway.
 */
export async function waitOnShared(
  shared: SharedWatch,
  read: LineReader,
  state: Standing,
  signal: AbortSignal,
  plain: boolean,
): Promise<Standing> {
  const predecessor = state.predecessor!;
  const wait = shared.waitForDelete(predecessor, state.header.revision, signal);
  try {
    if (await wait.gap) {
      const now = await read({ signal });
      if (moved(now, predecessor)) return now;
    }
    const { header, wasFirst } = await wait.deleted;
    if (state.predecessorIsFirst || (plain && wasFirst)) return { header, revision: state.revision, present: true };
  } catch (error) {
    // A reopened watch resumes from its last revision; if that history was compacted, a read tells as well.
    if (!isEtcdError(error, "COMPACTED") || signal.aborted) throw error;
  } finally {
    wait.cancel();
  }
  return read({ signal });
}
