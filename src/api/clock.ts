import { describe, invalidArgument } from "../errors/catalogue.js";
import { backgroundTimer } from "../gateway/signals.js";

/**
 * The clock a client's sessions measure their leases' deadlines on, and run their renewals and deadline timers
 * on: monotonic milliseconds, never wall time, which jumps. The runtime's by default; a test passes the mock's
 * (`createMockEtcd().clock`) so that `mock.advance()` ends a session's lease on both sides at once.
 */
export interface Clock {
  /** Monotonic milliseconds. */
  now(): number;
  /**
   * Calls `fire` once, `ms` milliseconds of this clock from now; the function returned cancels it. A timer must
   * not keep a process alive.
   */
  setTimer(fire: () => void, ms: number): () => void;
}

/** The runtime's clock: `performance.now()` and timers that keep no Node or Bun process alive. */
export const monotonicClock: Clock = {
  now: () => performance.now(),
  setTimer: (fire, ms) => {
    const timer = backgroundTimer(fire, ms);
    return () => clearTimeout(timer);
  },
};

/** The `clock` option, checked: an object with `now()` and `setTimer()`. */
export function clockArg(value: unknown): Clock {
  if (value === undefined) return monotonicClock;
  const clock = value as Partial<Clock> | null;
  if (
    typeof clock !== "object" ||
    clock === null ||
    typeof clock.now !== "function" ||
    typeof clock.setTimer !== "function"
  ) {
    throw invalidArgument(`clock must be an object with now() and setTimer(fire, ms), got ${describe(value)}`);
  }
  return clock as Clock;
}
