import type { EtcdClient } from "../../api/client.js";
import type { KeyValue, ResponseHeader } from "../../api/codec.js";
import { type EtcdError, isEtcdError } from "../../errors/etcd-error.js";
import { delay, whenAborted } from "../../gateway/signals.js";
import { lookAgain } from "./look-again.js";
import { enterLine, LINE_IDLE_TIMEOUT, type LineStream, OPEN_TIMEOUT } from "./line-watch.js";
import { moved } from "./read.js";
import type { Incarnation, Joined, LineReader, Standing, WaitContext, Waiting, Woken } from "./standing.js";

/**
 * How a waiter waits for its turn, as Go's `waitDeletes`: it watches only its predecessor (the newest key created
 * before its own), so a release wakes exactly one waiter (no herd) and waiters are served in the order they
 * joined. When the predecessor goes, one read tells whether we are first or who is ahead now (a waiter ahead gave
 * up); right behind the head, its delete alone makes us first.
 *
 * A watch is opened without a start revision: etcd serves a watch from a past revision from its "unsynced"
 * set, caught up on a sync pass every 100 ms, so every handoff would wait up to 100 ms (Go's Mutex pays it).
 * One without is synced and delivers events as they commit; what it cannot show is a delete between our read
 * and its creation, which its `created` revision rules out or one more read closes.
 */

/** How long one stream of a waiter's watch of its predecessor lives, as a line's (see LINE_IDLE_TIMEOUT). */
export const WAIT_IDLE_TIMEOUT = LINE_IDLE_TIMEOUT;

/**
 * A member that stalls without closing its connections keeps its streams open and silent. So a wait near the
 * front (at most SECOND_WATCH_DEPTH keys ahead) that lasts this long opens a second watch elsewhere, and a lone
 * waiter further back reads the line again elsewhere after this long, then twice as long each time. Short
 * waits (a hot lock's handoffs) open nothing more.
 */
export const SECOND_WATCH_AFTER = 1_000;
export const SECOND_WATCH_DEPTH = 3;

/**
 * The life of each stream of a lone waiter's watch with `ahead` keys ahead: a waiter far back cannot take the
 * lock before everyone ahead has held it, so it renews less often (0.1 s more per key ahead, at most 30 s).
 */
export function waitIdleTimeout(ahead: number | undefined): number {
  return ahead === undefined ? WAIT_IDLE_TIMEOUT : Math.min(30_000, WAIT_IDLE_TIMEOUT + 100 * Math.max(0, ahead - 1));
}

/** How long a wait whose stream broke beyond its reconnections pauses before it reads its line instead. */
export const BROKEN_STREAM_PAUSE = 1_000;

/**
 * What a wait does when the stream it waits on fails. A history compacted away or a stream held back: it reads
 * again at once. A stream broken beyond its own reconnections (an outage, a proxy that drops streams): it reads
 * again after BROKEN_STREAM_PAUSE, so that it waits out its own timeout through an outage, as Go's waiter does,
 * instead of failing on its stream's error, and a stream that breaks as soon as it opens costs a read per pause,
 * never a loop. Anything else (a refusal, the wait's own abort) ends the wait: thrown.
 */
export async function afterStreamFailure(error: unknown, signal: AbortSignal): Promise<void> {
  if (signal.aborted) throw error;
  if (isEtcdError(error, "COMPACTED") || isEtcdError(error, "STREAM_HELD_BACK")) return;
  if (!isEtcdError(error, "UNAVAILABLE") && !isEtcdError(error, "TIMEOUT")) throw error;
  await delay(BROKEN_STREAM_PAUSE, signal);
}

/**
 * A contender's wait after its join: none into an empty line; else, from where the join showed it (a resent join
 * reads the line first), `busy` for a try that may not wait, or its turn (`waitForTurn`).
 */
export async function waitInLine(
  client: EtcdClient,
  context: Waiting,
  joined: Joined,
  read: LineReader,
  busy: (holder: string) => EtcdError,
  own?: Incarnation,
): Promise<ResponseHeader> {
  if (joined.created && joined.predecessor === undefined) return joined.header;
  if (joined.busy) throw busy(joined.holder!.key);
  const start = joined.created ? joined : await read({ signal: context.signal });
  if (start.present && start.predecessor !== undefined) {
    if (context.tryOnly) throw busy(joined.holder?.key ?? start.predecessor.key);
    context.waiting(start.ahead);
  }
  return waitForTurn(client, read, start, context, own);
}

/**
 * Waits until nothing is ahead of us, from `start`; returns the header that showed it, SESSION_EXPIRED when our key
 * goes. `own`: our key, in a line where each key waits for the next older one (the line's stream marks it head).
 * Its exits are the whole of "I hold", each with its reason.
 */
export async function waitForTurn(
  client: EtcdClient,
  read: LineReader,
  start: Standing,
  context: WaitContext,
  own?: Incarnation,
): Promise<ResponseHeader> {
  let state = start;
  /** Keys ahead of us when we last looked: exact after the join, at least one fewer after each departure. */
  let ahead = start.predecessorIsFirst ? 1 : start.ahead;
  // Streams through this endpoint come back held back (a buffering proxy): the wait reads instead.
  let mode = client.transport.streamsHeldBack ? "poll" : context.mode;
  /** The key we last waited for: when nothing is ahead any more, it left last. */
  let departed: KeyValue | undefined;
  for (;;) {
    // Not held: our key left the line, so our lease ended (Go concludes so too).
    if (!state.present) throw context.expired();
    // I hold: a read (or the join) showed no key older than ours.
    if (state.predecessor === undefined) {
      if (departed !== undefined) await context.handover(departed);
      return state.header;
    }
    departed = state.predecessor;
    if (mode === "poll") {
      await delay(context.pollInterval, context.signal);
      state = await read({ signal: context.signal });
      continue;
    }
    let woken: Woken;
    try {
      woken = await predecessorGone(client, read, state, context.signal, ahead, own);
    } catch (error) {
      await afterStreamFailure(error, context.signal);
      if (isEtcdError(error, "STREAM_HELD_BACK")) mode = "poll";
      else state = await read({ signal: context.signal });
      continue;
    }
    // I hold: the key we waited for was the line's head, and only it was ahead of us; keys only join behind us.
    if ("head" in woken) {
      await context.handover(departed);
      return woken.head;
    }
    state = woken.now;
    ahead = state.predecessorIsFirst ? 1 : ahead === undefined ? undefined : Math.max(1, ahead - 1);
  }
}

/**
 * Waits for the predecessor's key to go: on a watch of that key alone, or on the line's stream shared with the
 * client's other waiters and holdings. A second watch or a look elsewhere starts after SECOND_WATCH_AFTER;
 * whichever ends the wait, the other is stopped.
 */
async function predecessorGone(
  client: EtcdClient,
  read: LineReader,
  state: Standing,
  signal: AbortSignal,
  ahead: number | undefined,
  own: Incarnation | undefined,
): Promise<Woken> {
  const idleTimeout = waitIdleTimeout(ahead);
  const waiter = enterLine(client, state.predecessor!.key);
  // Ends the branch that loses once a second one has started; a wait that ends before then (every handoff of a hot
  // lock) only clears the timer, where an abort would build an error per listener. Tied by hand: AbortSignal.any
  // costs more.
  const over = new AbortController();
  const unfollow = whenAborted(signal, () => over.abort(signal.reason));
  const both = over.signal;
  const first: { endpoint: string | undefined } = { endpoint: undefined };
  let timer: ReturnType<typeof setTimeout> | undefined;
  let started = false;
  try {
    const shared = waiter.sharedWatch();
    const watched =
      shared === undefined
        ? ownWatch(client, read, state, both, idleTimeout, first)
        : onShared(shared, read, state, both, own);
    const elsewhere = () => shared?.endpoint ?? first.endpoint ?? client.transport.endpoint;
    let second: Promise<Woken>;
    if (ahead === undefined || ahead <= SECOND_WATCH_DEPTH) {
      second = new Promise((resolve) => {
        timer = setTimeout(() => {
          started = true;
          resolve(ownWatch(client, read, state, both, idleTimeout, { endpoint: elsewhere() }));
        }, SECOND_WATCH_AFTER);
      });
    } else if (shared === undefined) {
      started = true;
      const watchAt = (now: Standing, endpoint: string) => ownWatch(client, read, now, both, idleTimeout, { endpoint });
      second = lookAgain(read, state, both, elsewhere, watchAt);
    } else {
      return await watched;
    }
    // The race subscribes to both at once: the loser's rejection, if any, is handled.
    return await Promise.race([watched, second]);
  } finally {
    clearTimeout(timer);
    unfollow();
    if (started) over.abort();
    waiter.leave();
  }
}

/**
 * Waits on the line's stream for the predecessor's delete, then reads where we stand, unless the predecessor was
 * the head: the join or a read showed it the only key ahead, or (`own`: a line where each key waits for the next
 * older one) a waiter of this process came to hold with that very key. We mark our key the head once nothing is
 * ahead of it, for the waiter behind us.
 */
async function onShared(
  shared: LineStream,
  read: LineReader,
  state: Standing,
  signal: AbortSignal,
  own: Incarnation | undefined,
): Promise<Woken> {
  const predecessor = state.predecessor!;
  const wait = shared.waitForDelete(predecessor, state.header.revision, signal);
  let woken: Woken | undefined;
  try {
    if (await wait.gap) {
      const now = await read({ signal });
      if (moved(now, predecessor)) woken = { now };
    }
    if (woken === undefined) {
      const { header, wasFirst } = await wait.deleted;
      if (state.predecessorIsFirst || (own !== undefined && wasFirst)) woken = { head: header };
    }
  } catch (error) {
    // A reopened watch resumes from its last revision; if that history was compacted, a read tells as well.
    if (!isEtcdError(error, "COMPACTED") || signal.aborted) throw error;
  } finally {
    wait.cancel();
  }
  woken ??= { now: await read({ signal }) };
  const first = "head" in woken || (woken.now.present && woken.now.predecessor === undefined);
  if (own !== undefined && first) shared.markFirst(own);
  return woken;
}

/**
 * Watches the predecessor's key alone. `on.endpoint`: the endpoint to avoid when opening (a second watch beside
 * one that may have stalled); the endpoint the watch is created on is written back to it.
 */
async function ownWatch(
  client: EtcdClient,
  read: LineReader,
  state: Standing,
  signal: AbortSignal,
  idleTimeout: number,
  on: { endpoint: string | undefined },
): Promise<Woken> {
  const predecessor = state.predecessor!;
  const watching = new AbortController();
  // A wait given up before it began (between a join's answer and its wait) must not open a watch at all.
  const unfollow = whenAborted(signal, () => watching.abort(signal.reason));
  const avoid = on.endpoint;
  const reread = () => read({ signal, avoid });
  try {
    return await new Promise<Woken>((resolve, reject) => {
      let created = false;
      // A delete between our read and the watch's creation: ruled out by the created revision, or read.
      const closeGap = (revision: number, endpoint: string) => {
        on.endpoint = endpoint;
        if (created) return;
        created = true;
        if (revision <= state.header.revision) return;
        reread().then((now) => {
          if (moved(now, predecessor)) resolve({ now });
        }, reject);
      };
      const follow = async (): Promise<Woken> => {
        try {
          const batches = client.watch({
            key: predecessor.keyBytes,
            noPut: true,
            idleTimeout,
            timeout: OPEN_TIMEOUT,
            onCreated: closeGap,
            avoid,
            signal: watching.signal,
          });
          for await (const batch of batches) {
            if (!batch.events.some((event) => event.type === "delete")) continue;
            if (state.predecessorIsFirst) return { head: batch.header };
            break;
          }
        } catch (error) {
          if (!isEtcdError(error, "COMPACTED") || signal.aborted) throw error;
        }
        return { now: await reread() };
      };
      follow().then(resolve, reject);
    });
  } finally {
    unfollow();
    watching.abort();
  }
}
