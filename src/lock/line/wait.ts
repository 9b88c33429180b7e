import type { EtcdClient } from "../../api/client.js";
import type { ResponseHeader } from "../../api/codec.js";
import { isEtcdError } from "../../errors/etcd-error.js";
import { requestScopedIo } from "../../gateway/isolate.js";
import { delay } from "../../gateway/signals.js";
import { moved } from "./read.js";
import type { Incarnation, LineReader, Standing, WaitContext } from "./standing.js";

import { lookAgain } from "./look-again.js";
import { SharedWatch, waitOnShared } from "./shared-watch.js";

/**
 * How a waiter waits for its turn: it watches only its predecessor (the newest key created before its own), so
 * a release wakes exactly one waiter (no herd) and waiters are served in the order they joined. When the
 * predecessor goes, one read tells whether we are first or who is ahead now (a waiter ahead gave up); right
 * behind the holder, its delete alone makes us first.
 *
 * A watch is opened without a start revision: etcd serves a watch from a past revision from its "unsynced"
 * set, caught up on a sync pass every 100 ms, so every handoff would wait up to 100 ms (Go's Mutex pays it).
 * One without is synced and delivers events as they commit; what it cannot show is a delete between our read
 * and its creation, which its `created` revision rules out or one more read closes.
 */

/**
 * How long one stream of a waiter's watch lives (etcd ends it at this age, its successor opened just before); one
 * silent a second longer is a dead connection (a paused member, a NAT that dropped the flow), reopened elsewhere.
 */
export const WAIT_IDLE_TIMEOUT = 2_000;

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

/**
 * Waits until `read` shows nothing ahead of us, from `start`; returns the header that showed it, SESSION_EXPIRED
 * when our key goes. `own`: our key in a line where each key waits for the next older one (SharedWatch.markFirst).
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
  for (;;) {
    if (!state.present) throw context.expired();
    if (state.predecessor === undefined) return state.header;
    if (context.mode === "poll") {
      await delay(context.pollInterval, context.signal);
      state = await read({ signal: context.signal });
    } else {
      state = await predecessorGone(client, read, state, context.signal, ahead, own);
      ahead = state.predecessorIsFirst ? 1 : ahead === undefined ? undefined : Math.max(1, ahead - 1);
    }
  }
}

/**
 * Waits for the predecessor's key to go and resolves with where we stand then: on a watch of that key alone, or
 * on the line's watch shared with the client's other waiters (SharedWatch). A second watch or a look elsewhere
 * starts after SECOND_WATCH_AFTER; whichever ends the wait, the other is stopped.
 */
async function predecessorGone(
  client: EtcdClient,
  read: LineReader,
  state: Standing,
  signal: AbortSignal,
  ahead: number | undefined,
  own: Incarnation | undefined,
): Promise<Standing> {
  const idleTimeout = waitIdleTimeout(ahead);
  const waiter = enterLine(client, state.predecessor!.key);
  // Ends the branch that loses once a second one has started; a wait that ends before then (every handoff of a hot
  // lock) only clears the timer, where an abort would build an error per listener. Tied by hand: AbortSignal.any
  // costs more.
  const over = new AbortController();
  const follow = () => over.abort(signal.reason);
  if (signal.aborted) follow();
  else signal.addEventListener("abort", follow, { once: true });
  const both = over.signal;
  const first: { endpoint: string | undefined } = { endpoint: undefined };
  let timer: ReturnType<typeof setTimeout> | undefined;
  let started = false;
  try {
    const shared = waiter.sharedWatch();
    const watched =
      shared === undefined
        ? ownWatch(client, read, state, both, idleTimeout, first)
        : waitOnShared(shared, read, state, both, own !== undefined).then((now) => {
            if (own !== undefined && now.present && now.predecessor === undefined) shared.markFirst(own);
            return now;
          });
    const elsewhere = () => shared?.endpoint ?? first.endpoint ?? client.transport.endpoint;
    let second: Promise<Standing>;
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
    watched.catch(() => {});
    second.catch(() => {});
    return await Promise.race([watched, second]);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener("abort", follow);
    if (started) over.abort();
    waiter.leave();
  }
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
): Promise<Standing> {
  const predecessor = state.predecessor!;
  const watching = new AbortController();
  const stop = () => watching.abort(signal.reason);
  signal.addEventListener("abort", stop, { once: true });
  const avoid = on.endpoint;
  const reread = () => read({ signal, avoid });
  try {
    return await new Promise<Standing>((resolve, reject) => {
      let created = false;
      // A delete between our read and the watch's creation: ruled out by the created revision, or read.
      const closeGap = (revision: number, endpoint: string) => {
        on.endpoint = endpoint;
        if (created) return;
        created = true;
        if (revision <= state.header.revision) return;
        reread().then((now) => {
          if (moved(now, predecessor)) resolve(now);
        }, reject);
      };
      const follow = async (): Promise<Standing> => {
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
            if (state.predecessorIsFirst) return { header: batch.header, revision: state.revision, present: true };
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

/** This client deleted `key` at `header`'s revision (a release's answer): its waiters behind that key wake now. */
export function releasedHere(client: EtcdClient, key: string, header: ResponseHeader): void {
  const line = linesByClient.get(client)?.get(key.slice(0, key.lastIndexOf("/") + 1));
  line?.watch?.deleted(key, header.revision, header);
}

/** A client's waiters in one line, and the line's shared watch while one is open. */
interface Waiters {
  waiters: number;
  watch: SharedWatch | undefined;
}

/** The lines each client waits in, by prefix: beside the client, which knows nothing of lines. */
const linesByClient = new WeakMap<EtcdClient, Map<string, Waiters>>();

/**
 * Counts a waiter into the line `key` belongs to (the keys under its parent). A line's stream carries every
 * delete of the line to every process that holds one, so it opens only where it pays: for a second waiter of
 * the same client. A waiter alone in its process (the serverless case) watches its predecessor's key alone, so
 * a release still reaches one process; so does every waiter in Workers, where one request cannot read a stream
 * another opened.
 */
export function enterLine(client: EtcdClient, key: string, idleTimeout = WAIT_IDLE_TIMEOUT) {
  const prefix = key.slice(0, key.lastIndexOf("/") + 1) || key;
  let lines = linesByClient.get(client);
  if (lines === undefined) linesByClient.set(client, (lines = new Map()));
  const own = lines;
  let here = own.get(prefix);
  if (here === undefined) own.set(prefix, (here = { waiters: 0, watch: undefined }));
  const line = here;
  line.waiters++;
  const forget = () => {
    if (line.waiters === 0 && line.watch === undefined && own.get(prefix) === line) own.delete(prefix);
  };
  let left = false;
  return {
    sharedWatch: (): SharedWatch | undefined => {
      if (line.watch === undefined && line.waiters >= 2 && !requestScopedIo()) {
        const opened: SharedWatch = new SharedWatch(client, prefix, idleTimeout, () => {
          if (line.watch === opened) line.watch = undefined;
          forget();
        });
        line.watch = opened;
      }
      return line.watch;
    },
    leave: () => {
      if (left) return;
      left = true;
      line.waiters--;
      forget();
    },
  };
}
