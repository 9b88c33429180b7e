import type { EtcdClient } from "../api/client.js";
import type { ResponseHeader } from "../api/codec.js";
import { aborted, unavailable } from "../errors/catalogue.js";
import { backgroundTimer } from "../gateway/signals.js";

/**
 * How long a line's watch stays open after its last waiter left. On a hot lock the next waiter of this
 * process comes within milliseconds and finds the stream open and synced; a lock gone quiet closes it. Kept
 * short: the open stream keeps a Node process from exiting until then.
 */
const LINGER_MS = 250;

/** What a waiter is told: the delete of the key it waits for, or the end of the watch. */
export interface DeleteWait {
  /**
   * The revision from which on every delete in the line reaches this waiter: a delete at or below it and
   * above the waiter's own read may have gone by before it subscribed, so it reads the line once then.
   */
  readonly since: Promise<number>;
  /** Resolves with the header of the delete's event. */
  readonly deleted: Promise<ResponseHeader>;
  /** Unsubscribes (the wait is over or abandoned). */
  cancel(): void;
}

interface Subscriber {
  key: string;
  deleted: (header: ResponseHeader) => void;
  failed: (error: unknown) => void;
}

/**
 * One watch stream per line (the keys under the predecessor's parent, `<name>/`) and client, shared by every
 * waiter of this process in that line. Each waiter still waits only for its own predecessor's delete, so a
 * release wakes one waiter, as with a watch per waiter; but a handoff no longer opens and tears down a
 * connection (a watch's connection cannot be reused once it is aborted mid-stream), which was most of the
 * client's work per handoff on a hot lock, and etcd keeps one watcher per process instead of one per waiter.
 */
export class LineWatch {
  readonly #subscribers = new Map<string, Set<Subscriber>>();
  readonly #controller = new AbortController();
  readonly #created: Promise<number>;
  /** The revision through which deletes have been handed to subscribers; 0 until the watch is created. */
  #seen = 0;
  #linger: ReturnType<typeof setTimeout> | undefined;
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
    const onCreated = (revision: number) => {
      // Reopened streams resume from the last delivered revision: only the first creation sets the start.
      if (this.#seen === 0) {
        this.#seen = revision;
        created(revision);
      }
    };
    this.#follow(client, prefix, idleTimeout, onCreated).catch((error: unknown) => {
      failed(error);
      this.#fail(error);
    });
  }

  /** Subscribes to the delete of `key`; `signal` abandons the wait (ABORTED). */
  waitForDelete(key: string, signal: AbortSignal): DeleteWait {
    if (this.#failure !== undefined) {
      const failure = Promise.reject(this.#failure);
      failure.catch(() => {});
      return { since: failure, deleted: failure, cancel: () => {} };
    }
    if (this.#linger !== undefined) clearTimeout(this.#linger);
    this.#linger = undefined;
    let subscriber!: Subscriber;
    const deleted = new Promise<ResponseHeader>((resolve, reject) => {
      subscriber = { key, deleted: resolve, failed: reject };
    });
    deleted.catch(() => {});
    const since = this.#seen > 0 ? Promise.resolve(this.#seen) : this.#created;
    let keys = this.#subscribers.get(key);
    if (keys === undefined) this.#subscribers.set(key, (keys = new Set()));
    keys.add(subscriber);
    const onAbort = () => {
      cancel();
      subscriber.failed(aborted(signal.reason));
    };
    const cancel = () => {
      signal.removeEventListener("abort", onAbort);
      this.#unsubscribe(subscriber);
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    // A waiter that gives up before creation must not wait for it: its abort rejects `since` too.
    const sinceOrAbort = Promise.race([since, deleted.then(() => this.#seen)]);
    sinceOrAbort.catch(() => {});
    return { since: sinceOrAbort, deleted, cancel };
  }

  async #follow(client: EtcdClient, prefix: string, idleTimeout: number, onCreated: (revision: number) => void): Promise<void> {
    const query = { prefix, noPut: true, idleTimeout, onCreated, signal: this.#controller.signal };
    for await (const batch of client.watch(query)) {
      for (const event of batch.events) {
        const waiting = this.#subscribers.get(event.kv.key);
        if (waiting === undefined) continue;
        this.#subscribers.delete(event.kv.key);
        for (const subscriber of waiting) subscriber.deleted(batch.header);
      }
      // One revision per batch; a subscriber from now on needs no read for what it already holds.
      if (batch.events.length > 0) this.#seen = Math.max(this.#seen, batch.events[0]!.kv.modRevision);
      if (this.#subscribers.size === 0) this.#idle();
    }
    throw unavailable("the line's watch ended");
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
 * The line watches of each client, by prefix. Held beside the client rather than in it: the client knows
 * nothing of lines, and a client that is dropped takes its watches' entries with it.
 */
const watchesByClient = new WeakMap<EtcdClient, Map<string, LineWatch>>();

/** The shared watch of the line that `key` belongs to (the keys under its parent), opened if none is. */
export function lineWatchOf(client: EtcdClient, key: string, idleTimeout: number): LineWatch {
  const slash = key.lastIndexOf("/");
  // A key with no parent is its own line: the watch follows that key alone.
  const prefix = slash < 0 ? key : key.slice(0, slash + 1);
  let watches = watchesByClient.get(client);
  if (watches === undefined) watchesByClient.set(client, (watches = new Map()));
  let watch = watches.get(prefix);
  if (watch === undefined) {
    const own = watches;
    const opened: LineWatch = new LineWatch(client, prefix, idleTimeout, () => {
      if (own.get(prefix) === opened) own.delete(prefix);
    });
    watch = opened;
    watches.set(prefix, watch);
  }
  return watch;
}
