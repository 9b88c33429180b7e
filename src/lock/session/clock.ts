/**
 * Monotonic milliseconds. Lease deadlines are measured on this clock, never on wall time, which jumps.
 */
export function now(): number {
  return performance.now();
}
