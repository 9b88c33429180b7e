// What onEvent tests compare: the events a handler was told, without the timings that vary from run to run.
import type { EtcdEvent } from "../../src/index.js";

/** The events of `types`, in order, each without its timing fields. */
export function eventShapes(events: readonly EtcdEvent[], types: ReadonlyArray<EtcdEvent["type"]>): unknown[] {
  return events
    .filter((event) => types.includes(event.type))
    .map((event) => {
      const { ms: _ms, waitedMs: _w, heldMs: _h, delayMs: _d, ...rest } = event as EtcdEvent & Record<string, unknown>;
      return rest;
    });
}
