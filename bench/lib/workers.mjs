// W workers looping one cycle each for a fixed time: the throughput shape of §3 and §4.
import { bounded, Tally } from "./bounded.mjs";
import { cpuMicrosOf, ownCpuMicros } from "./cpu-time.mjs";

/**
 * Runs `cycle(worker)` in `workers` concurrent loops until `seconds` have passed, each call bounded by
 * `boundMs`. A worker whose call outlives its bound stops (its state is unknown). Cycles/s counts the
 * cycles completed over the time until the last worker stopped; CPU per cycle is this process's and, given
 * its pid, etcd's.
 */
export async function runWorkers(workers, seconds, cycle, boundMs, etcdPid) {
  const failures = new Tally();
  let done = 0;
  const cpu = ownCpuMicros();
  const etcdCpu = cpuMicrosOf(etcdPid);
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
  // CPU per completed cycle: this process's (the client, with every contender's work at the time), and etcd's.
  const etcdUsed = etcdCpu === undefined ? undefined : cpuMicrosOf(etcdPid) - etcdCpu;
  return {
    rate: done / elapsed,
    done,
    failures,
    clientCpu: (ownCpuMicros() - cpu) / done,
    etcdCpu: etcdUsed === undefined ? NaN : etcdUsed / done,
  };
}
