import type { EtcdClient } from "../../api/client.js";
import type { ResponseHeader } from "../../api/codec.js";
import { locked } from "../../errors/catalogue.js";
import type { EtcdError } from "../../errors/etcd-error.js";
import { isEtcdError } from "../../errors/etcd-error.js";
import { anySignal, delay } from "../../gateway/signals.js";
import type { Joined } from "./join.js";
import { type LineReader, type LineState, lineReader, onlyContenders, type Position } from "./read.js";
import { enterLine, type Incarnation, type SharedWatch } from "./shared-watch.js";
import { untilAnswered } from "./until-answered.js";
import type { WaitMode } from "./wait-options.js";

/**
 * How a waiter waits for its turn: it watches only its immediate predecessor (the newest key created
 * before its own), so a release wakes exactly one waiter (no herd) and waiters are served in the order
 * they joined. When the predecessor is deleted, one read tells the waiter whether it is now first or who
 * its new predecessor is (a waiter ahead of it gave up).
 */

/**
 * How long one stream of a waiter's watch (or of a line's shared watch) lives before it is renewed. The server
 * ends every stream at this age (Grpc-Timeout), busy or quiet, after its successor was opened; a stream silent
 * a second longer is a dead connection (a paused member, a NAT that dropped the flow) and is reopened on
 * another endpoint. So a waiter behind a silent connection learns that the lock is free within 3 s plus one
 * reopen and one read.
 */
export const WAIT_IDLE_TIMEOUT = 2_000;

/**
 * How long a waiter near the front (see SECOND_WATCH_DEPTH) waits on one watch before it opens a second one, on
 * another endpoint when the client has one. A member that stalls without closing its connections (a paused VM, a disk
 * stall) stops delivering while its stream stays open: the idle timeout finds it out only after its period and
 * a grace. The second watch hears the release meanwhile; a release before it opened is found by the read that
 * closes its gap. Short waits (a hot lock's handoffs) never open one, so etcd's watchers double only for the
 * few waits that last.
 */
export const SECOND_WATCH_AFTER = 1_000;

/**
 * The waiters with at most this many keys ahead open the second watch. Holders may pass in milliseconds, so a
 * waiter two or three back can be right behind the holder before its own watch has shown it one departure; a
 * waiter further back would double a deep line's streams for a wait that lasts anyway.
 */
export const SECOND_WATCH_DEPTH = 3;

/**
 * The life of each stream of a lone waiter's own watch with `ahead` keys ahead of it when it last looked.
 * Renewing costs a watch re-creation per waiter per period, which a deep line of many processes would turn
 * into a load of its own; a waiter far back cannot take the lock before everyone ahead has held it, so it
 * renews less often: 0.1 s more per key ahead, at most 30 s. (Waiters of one process share one stream.)
 */
export function waitIdleTimeout(ahead: number | undefined): number {
  return ahead === undefined ? WAIT_IDLE_TIMEOUT : Math.min(30_000, WAIT_IDLE_TIMEOUT + 100 * Math.max(0, ahead - 1));
}

/** What a wait needs of its acquisition. */
export interface WaitContext {
  readonly signal: AbortSignal;
  readonly mode: WaitMode;
  readonly pollInterval: number;
  /** `timeout: 0`: LOCKED instead of waiting. */
  readonly tryOnly: boolean;
  /** The error for "our own key is gone": our lease ended while we waited. */
  expired(): EtcdError;
  /** Tells `onEvent` the acquisition must wait; `position` counts the keys ahead of it, when known. */
  waiting(position?: number): void;
}

/**
 * Waits for our turn after the join. When our key was already there (this session joined before), one
 * read finds our predecessor first; our key gone by then means our lease ended.
 */
export async function waitInLine(
  client: EtcdClient,
  prefix: string,
  line: Joined,
  context: WaitContext,
): Promise<ResponseHeader> {
  const read = steadfast(lineReader(client, prefix, line.revision, onlyContenders));
  let start: Position = line;
  if (!line.created) start = checked(await read({ signal: context.signal }), context);
  // Each key waits for the next older one: whoever is behind our key is first once we are and we leave.
  return waitForTurn(client, read, start, context, { key: line.key, createRevision: line.revision });
}

/**
 * Waits in the line of lock `name` as `reader` shows it, from what the join showed (`created: false`: the join
 * found our key from an earlier send, so one read finds our position first). With `tryOnly`, LOCKED instead of
 * waiting. For lines whose waiters do not simply wait for the next older key (a reader waits for the newest
 * older writer) or that are one of several (lockAll).
 */
export async function waitAfterJoin(
  client: EtcdClient,
  name: string,
  reader: LineReader,
  joined: LineState & { created: boolean },
  context: WaitContext,
): Promise<ResponseHeader> {
  const read = steadfast(reader);
  const start = joined.created ? joined : await read({ signal: context.signal });
  if (!start.ownExists) throw context.expired();
  if (start.predecessor !== undefined) {
    if (context.tryOnly) throw locked(name, start.predecessor.key);
    context.waiting();
  }
  return waitForTurn(client, read, start, context);
}

/** `read`, sent again while unanswered and its signal has not aborted (see untilAnswered). */
export function steadfast(read: LineReader): LineReader {
  return (at) => untilAnswered(read, at, at);
}

/**
 * Waits until `read` shows no key to wait for, from `start` (a read, or the join that showed the same).
 * Returns the header of the read that showed it. Throws SESSION_EXPIRED (via `expired`) when our own key
 * disappears meanwhile. `own`: our key, given when the line is plain (each key waits for the next
 * older one), so that no key is ahead of ours once our wait is over.
 */
export async function waitForTurn(
  client: EtcdClient,
  read: LineReader,
  start: Position,
  context: WaitContext,
  own?: Incarnation,
): Promise<ResponseHeader> {
  let state = start;
  /** Keys ahead of us when we last looked: exact after the join, at least one fewer after each departure. */
  let ahead = start.predecessorIsFirst ? 1 : start.ahead;
  while (state.predecessor !== undefined) {
    if (context.mode === "poll") {
      await delay(context.pollInterval, context.signal);
      state = checked(await read({ signal: context.signal }), context);
    } else {
      state = checked(await predecessorGone(client, read, state, context.signal, ahead, own), context);
      ahead = state.predecessorIsFirst ? 1 : ahead === undefined ? undefined : Math.max(1, ahead - 1);
    }
  }
  return state.header;
}

function checked(state: LineState, context: WaitContext): LineState {
  if (!state.ownExists) throw context.expired();
  return state;
}

/**
 * Waits for the predecessor's key to go, then reads the line once; resolves with that read. A waiter alone
 * in its process watches the predecessor's key alone; one with company shares the line's watch (SharedWatch).
 *
 * Either watch is opened without a start revision: etcd serves a watch whose start revision is not newer
 * than the store's revision from its "unsynced" set, which it catches up only on a 100 ms sync pass, so
 * under load (the store always moving on) every handoff would wait up to 100 ms. A watch opened without one
 * is synced and delivers events as they commit; what it cannot show is a delete between our read
 * (`state.header.revision`) and the moment we started listening. For our own watch that moment is its
 * `created` revision; for the shared one it is the last delete it had delivered, and the deletes before it
 * are in its recent history. If neither rules the gap out, one read of the line closes it. Go's Mutex watches
 * from the read's revision and pays the 100 ms tail; this keeps the same guarantee without it.
 */
async function predecessorGone(
  client: EtcdClient,
  read: LineReader,
  state: Position,
  signal: AbortSignal,
  ahead: number | undefined,
  own: Incarnation | undefined,
): Promise<LineState> {
  const idleTimeout = waitIdleTimeout(ahead);
  const waiter = enterLine(client, state.predecessor!.key, WAIT_IDLE_TIMEOUT);
  // Ends the branch that loses once a second one has started. A wait that ends before then (every handoff of
  // a hot lock) only clears the timer: an abort would build an error for each listener, all for nothing.
  const over = new AbortController();
  const both = anySignal(signal, over.signal);
  const first: { endpoint: string | undefined } = { endpoint: undefined };
  let timer: ReturnType<typeof setTimeout> | undefined;
  let started = false;
  try {
    const shared = waiter.sharedWatch();
    const watched =
      shared === undefined
        ? ownWatch(client, read, state, both, idleTimeout, first)
        : onSharedWatch(shared, read, state, both, own !== undefined).then((now) => {
            if (own !== undefined && now.ownExists && now.predecessor === undefined) shared.markFirst(own);
            return now;
          });
    // Elsewhere than the first watch: where it was created, or where it went if it never was.
    const elsewhere = () => shared?.endpoint ?? first.endpoint ?? client.transport.endpoint;
    let second: Promise<LineState>;
    if (ahead === undefined || ahead <= SECOND_WATCH_DEPTH) {
      // Near the front, where a stalled stream holds up a free lock.
      second = new Promise((resolve) => {
        timer = setTimeout(() => {
          started = true;
          resolve(ownWatch(client, read, state, both, idleTimeout, { endpoint: elsewhere() }));
        }, SECOND_WATCH_AFTER);
      });
    } else if (shared === undefined) {
      started = true;
      second = lookAgain(client, read, state, both, idleTimeout, elsewhere);
    } else {
      return await watched;
    }
    watched.catch(() => {});
    second.catch(() => {});
    return await Promise.race([watched, second]);
  } finally {
    // Until a second branch starts, only the first runs, and it has settled by now: just the timer is left.
    clearTimeout(timer);
    if (started) over.abort();
    waiter.leave();
  }
}

/**
 * A lone waiter further back than SECOND_WATCH_DEPTH cannot count the departures ahead of its predecessor, so
 * it may be right behind the holder, or first, while its own watch has stalled. It reads the line again
 * elsewhere than that watch after SECOND_WATCH_AFTER, then after twice as long each time: a line that moved
 * ends the wait with that read, and once right behind the holder it opens the second watch. A few reads per
 * long wait, where a second stream from the start would double a deep line's streams. (Waiters that share
 * their process's watch do not: a deep line in one process would send one read per waiter.)
 */
async function lookAgain(
  client: EtcdClient,
  read: LineReader,
  state: Position,
  signal: AbortSignal,
  idleTimeout: number,
  elsewhere: () => string,
): Promise<LineState> {
  const predecessor = state.predecessor!;
  for (let wait = SECOND_WATCH_AFTER; ; wait *= 2) {
    await delay(wait, signal);
    const endpoint = elsewhere();
    const now = await read({ signal, avoid: endpoint });
    if (!now.ownExists || now.predecessor?.createRevision !== predecessor.createRevision) return now;
    if (now.predecessorIsFirst) return ownWatch(client, read, now, signal, idleTimeout, { endpoint });
  }
}

/** `plainLine`: each key of the line waits for the next older one, so what was first is followed by us. */
async function onSharedWatch(
  shared: SharedWatch,
  read: LineReader,
  state: Position,
  signal: AbortSignal,
  plainLine: boolean,
): Promise<LineState> {
  const predecessor = state.predecessor!;
  const wait = shared.waitForDelete(predecessor, state.header.revision, signal);
  try {
    if (await wait.gap) {
      const now = await read({ signal });
      if (!now.ownExists || now.predecessor?.createRevision !== predecessor.createRevision) return now;
    }
    const { header, wasFirst } = await wait.deleted;
    // The holder was the only key ahead of us (the join or read showed it, or a waiter of this process
    // found it first): its delete makes us first, with no read. Our own key is trusted as the lease is (the
    // session's deadline, checked before the lock is handed out), and a fenced write checks it on the
    // server anyway.
    if (state.predecessorIsFirst || (plainLine && wasFirst)) return { header, ownExists: true };
  } catch (error) {
    // A reopened watch resumes from its last revision; if that history was compacted, re-reading the line
    // tells us where we stand just as well.
    if (!isEtcdError(error, "COMPACTED") || signal.aborted) throw error;
  } finally {
    wait.cancel();
  }
  return read({ signal });
}

/**
 * Watches the predecessor's key alone. `on.endpoint`: the endpoint to avoid when opening (a second watch beside
 * one that may have stalled); the endpoint the watch is created on is written back to it.
 */
async function ownWatch(
  client: EtcdClient,
  read: LineReader,
  state: Position,
  signal: AbortSignal,
  idleTimeout: number,
  on: { endpoint: string | undefined },
): Promise<LineState> {
  const predecessor = state.predecessor!;
  const watching = new AbortController();
  const stop = () => watching.abort(signal.reason);
  signal.addEventListener("abort", stop, { once: true });
  // A second watch (and its reads) avoid the endpoint the first watch may have stalled on.
  const avoid = on.endpoint;
  const reread = () => read({ signal, avoid });
  try {
    return await new Promise<LineState>((resolve, reject) => {
      let created = false;
      const closeGap = (revision: number, endpoint: string) => {
        on.endpoint = endpoint;
        if (created) return;
        created = true;
        if (revision <= state.header.revision) return;
        reread().then((now) => {
          if (!now.ownExists || now.predecessor?.createRevision !== predecessor.createRevision) resolve(now);
        }, reject);
      };
      const follow = async (): Promise<LineState> => {
        try {
          const batches = client.watch({
            key: predecessor.keyBytes,
            noPut: true,
            idleTimeout,
            onCreated: closeGap,
            avoid,
            signal: watching.signal,
          });
          for await (const batch of batches) {
            if (!batch.events.some((event) => event.type === "delete")) continue;
            // As on the shared watch: right behind the holder, its delete alone makes us first.
            if (state.predecessorIsFirst) return { header: batch.header, ownExists: true };
            break;
          }
        } catch (error) {
          if (!isEtcdError(error, "COMPACTED") || signal.aborted) throw error;
        }
        return reread();
      };
      follow().then(resolve, reject);
    });
  } finally {
    signal.removeEventListener("abort", stop);
    watching.abort();
  }
}
