// Command-line entry for Node, Deno and Bun: `<runtime> main.mjs <endpoint> <runtime-name> <key-prefix>`.
// Prints exactly one JSON line on stdout: the observation, or `{ runtime, error }` with exit code 1.
import { errorReport, run } from "./script.mjs";

const args = globalThis.Deno?.args ?? globalThis.process?.argv?.slice(2) ?? [];
const [endpoint, runtime = "unknown", prefix] = args;

function fail() {
  if (globalThis.Deno) globalThis.Deno.exitCode = 1;
  else if (globalThis.process) globalThis.process.exitCode = 1;
}

/** Which runtime this is, as it reports itself: the test checks it against the pinned version. */
function engine() {
  if (globalThis.Deno) return `deno ${globalThis.Deno.version.deno}`;
  if (globalThis.Bun) return `bun ${globalThis.Bun.version}`;
  return `node ${globalThis.process?.version}`;
}

/** Where the bare specifier resolved: the test checks it is the packed copy in the temp project. */
function resolved() {
  try {
    return import.meta.resolve("etcd-edge");
  } catch (error) {
    return `unresolvable: ${error}`;
  }
}

try {
  console.log(
    JSON.stringify({ ...(await run({ endpoint, runtime, prefix })), engine: engine(), resolved: resolved() }),
  );
} catch (error) {
  console.log(JSON.stringify(errorReport(runtime, error)));
  fail();
}
