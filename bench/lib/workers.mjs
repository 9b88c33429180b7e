// W workers looping one cycle each for a fixed time: the throughput shape of §3 and §4.
import { bounded, Tally } from "./bounded.mjs";

/**
 * Runs `cycle(worker)` in `workers` concurrent loops until `seconds` have passed, each call bounded by
 * `boundMs`. A worker whose call outlives its bound stops (its state is unknown). Cycles/s counts the
 * cycles completed over the time until the last worker stopped.
 */
export async function runWorkers(workers, seconds, cycle, boundMs) {
  const failures = new Tally();
  let done = 0;
  const start = performance.now();
  const deadline = start + seconds * 1000;
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      while (performance.now() < deadline) {
        const result = await bounded(cycle(worker), boundMs);
        if (result.ok) done++;
        else {
          failures.add(result.code);
          if (result.hung) return;
        }
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  return { rate: done / elapsed, done, failures };
}
