/**
 * Monotonic milliseconds. Lease deadlines are measured on this clock, never on wall time, which jumps.
 */
export function now(): number {
  return performance.now();
}

/** A timer that does not keep a Node or Bun process alive; elsewhere a plain timer. */
export function backgroundTimer(callback: () => void, ms: number): ReturnType<typeof setTimeout> {
  const timer = setTimeout(callback, Math.max(0, ms));
  (timer as { unref?: () => void }).unref?.();
  return timer;
}
