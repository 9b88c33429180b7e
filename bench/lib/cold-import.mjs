// Cold import of the main entry: each run is a fresh Node process (the only child processes the bench
// starts), timing `await import("etcd-edge")` from inside it, so module loading and evaluation count but
// Node's own start-up does not.
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { median } from "./stats.mjs";

export function coldImportMs(runs) {
  const entry = fileURLToPath(import.meta.resolve("etcd-edge"));
  const importEntry = `await import(${JSON.stringify(entry)});`;
  const script = `const t = performance.now(); ${importEntry} console.log(performance.now() - t);`;
  const times = [];
  for (let i = 0; i < runs; i++) {
    times.push(Number(execFileSync(process.execPath, ["--input-type=module", "-e", script]).toString()));
  }
  return { median: median(times), min: Math.min(...times), max: Math.max(...times), n: runs };
}
