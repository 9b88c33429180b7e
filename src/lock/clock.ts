/**
 * Monotonic milliseconds. Lease deadlines are measured on this clock, never on wall time, which jumps.
 */
export function now(): number {
  return performance.now();
}

/** The longest delay timers honour; a longer one fires at once (every runtime stores it in an int32). */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * A timer that does not keep a Node or Bun process alive; elsewhere a plain timer. The delay is clamped to
 * [0, 2^31-1] ms, so a long lease renews every 24.8 days at most instead of in a tight loop; callers
 * re-check their deadline when it fires.
 */
export function backgroundTimer(callback: () => void, ms: number): ReturnType<typeof setTimeout> {
  const timer = setTimeout(callback, Math.min(MAX_TIMER_MS, Math.max(0, ms)));
  (timer as { unref?: () => void }).unref?.();
  return timer;
}
