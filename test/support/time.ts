// Time for tests and for the processes they start. Imports nothing, so plain Node (the chaos runner and its
// workers) loads it as well as test files.

/** Resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Wall-clock ms with the monotonic clock's precision: comparable across processes, unlike performance.now(). */
export const wallNow = (): number => performance.timeOrigin + performance.now();
