import type { EtcdClient } from "../../api/client.js";
import type { KeyValue, ResponseHeader } from "../../api/codec.js";
import { op } from "../../api/txn.js";
import { aborted, unavailable } from "../../errors/catalogue.js";
import { isEtcdError } from "../../errors/etcd-error.js";
import { requestScopedIo } from "../../gateway/isolate.js";
import { backgroundTimer, delay, whenAborted } from "../../gateway/signals.js";
import { resendPause } from "../resend/until-answered.js";
import type { Incarnation } from "./standing.js";

/**
 * A client's watch of one line (the keys under `<name>/`): one stream per line and client, for the client's
 * waiters in the line (each waits for its own predecessor's delete) and its holdings there (each follows its own
 * key). A handoff on a hot lock then opens and tears down no connection (a watch's connection cannot be reused
 * once aborted mid-stream: that was most of a client's work per handoff), and etcd keeps one watcher per process
 * instead of one per waiter.
 *
 * It opens only where it pays: for a client's second waiter in the line (a waiter alone in its process, the
 * serverless case, watches its predecessor's key alone, so a release still reaches one process; so does every
 * waiter in Workers, where one request cannot read a stream another opened), or for a holding that follows its
 * key. Once open, every waiter and holding of the client in the line uses it, until none is left for LINGER_MS.
 *
 * A stream opened for waiters alone asks etcd for deletes only: a waiter wakes on a delete, and on a hot lock a put
 * (every join) would be sent, parsed and dropped at each handoff, work on the handoff's path in etcd and in the
 * client (`bench/ab.mjs --hot`). A holding needs puts (an overwrite keeps its key): when one comes to follow its
 * key on such a stream, the line opens one with puts for everyone who comes after, and the first serves the
 * waiters already on it until they leave.
 */

/**
 * How long one stream of a line's watch lives (etcd ends it at this age, its successor opened just before); one
 * silent a second longer is a dead connection (a paused member, a NAT that dropped the flow), reopened elsewhere.
 */
export const LINE_IDLE_TIMEOUT = 1_000;

/** How long opening one of those streams may take, retries on other endpoints included: its life and grace. */
export const OPEN_TIMEOUT = 1.5 * LINE_IDLE_TIMEOUT;

/** How often a holding reads its keys while streams through the client's endpoint come back held back. */
const FOLLOW_POLL_MS = 1_000;

/**
 * How long a line's stream stays open after its last user left. On a hot lock the next waiter of this process
 * comes within milliseconds and finds the stream open and synced; a lock gone quiet closes it. Kept short: the
 * open stream keeps a Node process from exiting until then.
 */
const LINGER_MS = 250;

/**
 * How many of the latest deletes a line's stream remembers. A waiter subscribes a little after its own read of
 * the line; a hot lock's handoffs often land in between, and finding them here spares it a read.
 */
const RECENT_DELETES = 64;

/** The delete of the key a waiter waits for, as the line's stream (or a release of this client) told it. */
export interface Deleted {
  /** The delete's header. */
  header: ResponseHeader;
  /**
   * The deleted key was, as this process knew it, the line's head (its holder): the waiter right behind it holds
   * now. Known when a waiter of this process came to hold with that very key (see `markFirst`).
   */
  wasFirst: boolean;
}

/** What a waiter is told: the delete of the key it waits for, or the end of the stream. */
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

/** A holding's key followed on its line's stream: told what etcd has at that key whenever it may have changed. */
export interface Follower {
  readonly key: string;
  /** The prefix whose stream follows it: by default the key's line (the keys under its parent). */
  readonly line?: string | undefined;
  /** `kv`: the key as a read or an event shows it; undefined once it is deleted. */
  seen(kv: KeyValue | undefined): void;
}

/** What a waiter of one line is given by `enterLine`. */
export interface LineWaiter {
  /** The line's stream, if one is open or this waiter is the client's second in the line (it opens one). */
  sharedWatch(): LineStream | undefined;
  leave(): void;
}

/**
 * Counts a waiter into the line `key` belongs to (the keys under its parent) until it leaves; the line's stream
 * opens for a second waiter of the same client.
 */
export function enterLine(client: EtcdClient, key: string): LineWaiter {
  const line = lineOf(client, prefixOf(key));
  line.waiters++;
  let left = false;
  return {
    sharedWatch: () => line.streamFor(line.waiters >= 2),
    leave: () => {
      if (left) return;
      left = true;
      line.waiters--;
      line.forgetIfUnused();
    },
  };
}

/** Follows `follower`'s key on its line's stream until the returned function is called. */
export function followKey(client: EtcdClient, follower: Follower): () => void {
  return lineOf(client, follower.line ?? prefixOf(follower.key)).follow(follower);
}

/** This client deleted `key` at `header`'s revision (a release's answer): its waiters behind that key wake now. */
export function releasedHere(client: EtcdClient, key: string, header: ResponseHeader): void {
  linesByClient.get(client)?.get(prefixOf(key))?.stream?.deleted(key, header.revision, header);
}

/** The lines each client waits or holds in, by prefix: beside the client, which knows nothing of lines. */
const linesByClient = new WeakMap<EtcdClient, Map<string, Line>>();

function prefixOf(key: string): string {
  return key.slice(0, key.lastIndexOf("/") + 1) || key;
}

function lineOf(client: EtcdClient, prefix: string): Line {
  let lines = linesByClient.get(client);
  if (lines === undefined) linesByClient.set(client, (lines = new Map()));
  const own = lines;
  let line = own.get(prefix);
  if (line === undefined) {
    const made: Line = new Line(client, prefix, () => {
      if (own.get(prefix) === made) own.delete(prefix);
    });
    own.set(prefix, (line = made));
  }
  return line;
}

/** One client's waiters and followers in one line, and the line's stream while one is open. */
class Line {
  waiters = 0;
  stream: LineStream | undefined;
  readonly #client: EtcdClient;
  readonly #prefix: string;
  readonly #forget: () => void;
  readonly #followers = new Map<string, Set<Follower>>();
  /** Streams opened in a row that failed: the next one waits longer. */
  #failures = 0;
  /** Its followers' keys are read every FOLLOW_POLL_MS instead (streams through the endpoint are held back). */
  #polling = false;

  constructor(client: EtcdClient, prefix: string, forget: () => void) {
    this.#client = client;
    this.#prefix = prefix;
    this.#forget = forget;
  }

  /**
   * The open stream; else a new one when `open`, the runtime lets one request's stream serve another's, and
   * streams through the client's endpoint are not held back (its waiters then read).
   */
  streamFor(open: boolean): LineStream | undefined {
    const opens = open && !requestScopedIo() && !this.#client.transport.streamsHeldBack;
    if (this.stream === undefined && opens) this.#open(false);
    return this.stream;
  }

  follow(follower: Follower): () => void {
    let set = this.#followers.get(follower.key);
    if (set === undefined) this.#followers.set(follower.key, (set = new Set()));
    set.add(follower);
    let stream = this.stream;
    if (stream !== undefined && !stream.puts) {
      // A stream of deletes only, opened for waiters: its successor carries puts; it serves its waiters until they
      // leave, then closes (it is no longer the line's, so nobody else uses it).
      this.stream = undefined;
      stream.idle();
      stream = undefined;
    }
    // Joined an open stream: one read covers what it showed before; a new stream reads its followers once created
    // (what changed before it could show it).
    if (stream?.created) void this.#check([follower]);
    else if (stream === undefined && !this.#polling) this.#follow();
    const followed = set;
    return () => {
      followed.delete(follower);
      if (followed.size === 0 && this.#followers.get(follower.key) === followed) this.#followers.delete(follower.key);
      this.forgetIfUnused();
    };
  }

  /** Whether anyone of this client is in the line: the stream keeps open while so. */
  get used(): boolean {
    return this.waiters > 0 || this.#followers.size > 0;
  }

  forgetIfUnused(): void {
    if (this.used) return;
    if (this.stream === undefined) this.#forget();
    else this.stream.idle();
  }

  #open(background: boolean): void {
    const opened: LineStream = new LineStream(this.#client, this.#prefix, {
      background,
      puts: this.#followers.size > 0,
      // A stream the line has replaced (with one that carries puts) is used by its own subscribers alone.
      used: () => this.stream === opened && this.used,
      created: () => {
        this.#failures = 0;
        void this.#check([...this.#followers.values()].flatMap((set) => [...set]));
      },
      event: (key, kv) => {
        if (this.stream !== opened) return;
        for (const follower of this.#followers.get(key) ?? []) follower.seen(kv);
      },
      ended: (error) => {
        if (this.stream !== opened) return;
        this.stream = undefined;
        // RBAC refused it (a holder without read on the requests' records): a refusal does not pass, so it is not
        // opened again, and its followers are dropped.
        if (isEtcdError(error, "PERMISSION_DENIED")) this.#followers.clear();
        if (this.#followers.size === 0) return this.forgetIfUnused();
        // Broken beyond its own reconnections: open it again, after a pause, while anyone follows.
        void delay(resendPause(this.#failures++), undefined, true).then(() => {
          if (this.stream === undefined && this.#followers.size > 0) this.#follow();
          else this.forgetIfUnused();
        });
      },
    });
    this.stream = opened;
  }

  /**
   * Follows its followers' keys: on a stream, or, while streams through the client's endpoint come back held back,
   * on a read of them every FOLLOW_POLL_MS, until a stream may come again.
   */
  #follow(): void {
    if (!this.#client.transport.streamsHeldBack) return this.#open(true);
    this.#polling = true;
    void delay(FOLLOW_POLL_MS, undefined, true).then(async () => {
      await this.#check([...this.#followers.values()].flatMap((set) => [...set]));
      this.#polling = false;
      if (this.#followers.size > 0 && this.stream === undefined) this.#follow();
      else this.forgetIfUnused();
    });
  }

  /** One read of `followers`' keys: what changed before the stream could show it. */
  async #check(followers: Follower[]): Promise<void> {
    if (followers.length === 0) return;
    try {
      const read = await this.#client
        .txn()
        .then(...followers.map((f) => op.get(f.key)))
        .commit();
      for (const [i, follower] of followers.entries()) follower.seen(read.responses[i]?.kvs[0]);
    } catch {
      // The stream's next creation reads them again.
    }
  }
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

/** What a line's stream tells its line. */
interface StreamHooks {
  /** Opened for a holding (no caller's span traces it). */
  background: boolean;
  /** Carries puts, for a holding that follows its key; a stream for waiters alone asks for deletes only. */
  puts: boolean;
  /** Whether the line still has a waiter or a follower: the stream does not close while so. */
  used(): boolean;
  /** The watch was created: from here on it shows every change (reopenings resume where it stopped). */
  created(): void;
  /** Every event of the stream: the key, and what it is now (undefined: deleted). */
  event(key: string, kv: KeyValue | undefined): void;
  /** The stream ended for good, with `error`. */
  ended(error: unknown): void;
}

/**
 * One stream of a line's watch, until it fails or nobody uses it. Each waiter still waits only for its own
 * predecessor's delete, so a release wakes one waiter.
 */
export class LineStream {
  readonly #subscribers = new Map<string, Set<Subscriber>>();
  readonly #controller = new AbortController();
  readonly #created: Promise<number>;
  readonly #hooks: StreamHooks;
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

  /** @internal Opens the stream at once. */
  constructor(client: EtcdClient, prefix: string, hooks: StreamHooks) {
    this.#hooks = hooks;
    let created!: (revision: number) => void;
    let failed!: (error: unknown) => void;
    this.#created = new Promise<number>((resolve, reject) => {
      created = resolve;
      failed = reject;
    });
    this.#created.catch(() => {});
    const onCreated = (revision: number, endpoint: string) => {
      this.#endpoint = endpoint;
      // Reopened and renewed streams resume from the last delivered revision: only the first creation starts one.
      if (this.#seen !== 0) return;
      this.#seen = this.#recentFrom = revision;
      created(revision);
      hooks.created();
    };
    this.#follow(client, prefix, onCreated).catch((error: unknown) => {
      failed(error);
      this.#fail(error);
    });
    // Closes unless someone uses it: nothing may keep a stream open that nobody listens to.
    this.idle();
  }

  /** The endpoint its stream was last created on, once it was. */
  get endpoint(): string | undefined {
    return this.#endpoint;
  }

  /** Whether the stream carries puts (see StreamHooks.puts). */
  get puts(): boolean {
    return this.#hooks.puts;
  }

  /** Whether etcd has created its stream. */
  get created(): boolean {
    return this.#seen > 0;
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
    let keys = this.#subscribers.get(key);
    if (keys === undefined) this.#subscribers.set(key, (keys = new Set()));
    keys.add(subscriber);
    const unfollow = whenAborted(signal, () => {
      this.#unsubscribe(subscriber);
      subscriber.failed(aborted(signal.reason));
    });
    const cancel = () => {
      unfollow();
      this.#unsubscribe(subscriber);
    };
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
    onCreated: (revision: number, endpoint: string) => void,
  ): Promise<void> {
    const query = {
      prefix,
      noPut: !this.#hooks.puts,
      idleTimeout: LINE_IDLE_TIMEOUT,
      // A stream that does not open within its life and grace is as dead as one gone silent: reopened.
      timeout: OPEN_TIMEOUT,
      onCreated,
      signal: this.#controller.signal,
      background: this.#hooks.background,
    };
    for await (const batch of client.watch(query)) {
      for (const event of batch.events) {
        const key = event.kv.key;
        if (event.type === "delete") {
          const revision = event.kv.modRevision;
          const first = this.deleted(key, revision, batch.header);
          this.#remember({ key, revision, header: batch.header, firstRevision: first });
          this.#hooks.event(key, undefined);
        } else {
          this.#hooks.event(key, event.kv);
        }
      }
      // One revision per batch: a waiter that subscribes from now on finds this batch in #recent.
      if (batch.events.length > 0) this.#seen = Math.max(this.#seen, batch.events[0]!.kv.modRevision);
      if (!this.#hooks.used()) this.idle();
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

  /** Nobody uses it: it closes after LINGER_MS unless someone comes. */
  idle(): void {
    if (this.#linger !== undefined || this.#failure !== undefined) return;
    this.#linger = backgroundTimer(() => {
      this.#linger = undefined;
      if (this.#subscribers.size === 0 && !this.#hooks.used()) this.#fail(aborted("the line's watch was idle"));
    }, LINGER_MS);
  }

  #remember(gone: RecentDelete): void {
    this.#recent.push(gone);
    if (this.#recent.length > RECENT_DELETES) this.#recentFrom = this.#recent.shift()!.revision;
  }

  #unsubscribe(subscriber: Subscriber): void {
    const keys = this.#subscribers.get(subscriber.key);
    if (keys?.delete(subscriber) && keys.size === 0) this.#subscribers.delete(subscriber.key);
    if (this.#subscribers.size === 0 && !this.#hooks.used()) this.idle();
  }

  /** Ends the stream for good: its subscribers learn why, and the line opens a new one when it needs one. */
  #fail(error: unknown): void {
    if (this.#failure !== undefined) return;
    this.#failure = error;
    if (this.#linger !== undefined) clearTimeout(this.#linger);
    this.#linger = undefined;
    this.#controller.abort();
    const subscribers = [...this.#subscribers.values()].flatMap((keys) => [...keys]);
    this.#subscribers.clear();
    for (const subscriber of subscribers) subscriber.failed(error);
    this.#hooks.ended(error);
  }
}
