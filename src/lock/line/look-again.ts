import { delay } from "../../gateway/signals.js";
import { moved } from "./read.js";
import type { LineReader, Standing, Woken } from "./standing.js";

/** How long a lone waiter far back waits on its watch before it first looks at the line elsewhere. */
const LOOK_AGAIN_AFTER = 1_000;

/**
 * A lone waiter further back than SECOND_WATCH_DEPTH cannot count the departures ahead of its predecessor, so it
 * may be right behind the holder while its own watch has stalled (a member paused with its streams open). It
 * reads the line again elsewhere than that watch after a second, then twice as long each time: a line that moved
 * ends the wait with that read, and once right behind the holder it watches there (`watchAt`). A few reads per
 * long wait, where a second stream from the start would double a deep line's streams.
 */
export async function lookAgain(
  read: LineReader,
  state: Standing,
  signal: AbortSignal,
  elsewhere: () => string,
  watchAt: (now: Standing, endpoint: string) => Promise<Woken>,
): Promise<Woken> {
  for (let wait = LOOK_AGAIN_AFTER; ; wait *= 2) {
    await delay(wait, signal);
    const endpoint = elsewhere();
    const now = await read({ signal, avoid: endpoint });
    if (moved(now, state.predecessor!)) return { now };
    if (now.predecessorIsFirst) return watchAt(now, endpoint);
  }
}
