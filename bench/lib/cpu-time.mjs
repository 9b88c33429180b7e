// CPU time of the bench's own process and of the etcd it started, so a throughput figure can say where the
// two cores went: to the client or to etcd.
import { readFileSync } from "node:fs";
import { spawnSync } from "node:child_process";

/** Clock ticks per second of /proc's CPU times (almost always 100). */
const TICKS = Number(spawnSync("getconf", ["CLK_TCK"]).stdout?.toString().trim()) || 100;

/** Microseconds of CPU (user + system) used so far by process `pid`, or undefined where /proc cannot tell. */
export function cpuMicrosOf(pid) {
  if (pid === undefined) return undefined;
  try {
    // Fields after the command name (which may hold spaces), from the state on: utime and stime are 12th and 13th.
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / TICKS;
  } catch {
    return undefined;
  }
}

/** This process's CPU (user + system) in microseconds. */
export function ownCpuMicros() {
  const { user, system } = process.cpuUsage();
  return user + system;
}
