// Command-line entry for Node, Deno and Bun:
//   `<runtime> channels-main.mjs <endpoint> <runtime-name> <key-prefix> <cutting relay's endpoint>`.
// Prints exactly one JSON line: what channels.mjs observed, or `{ runtime, error }` with exit code 1.
import { observe } from "./channels.mjs";

const args = globalThis.Deno?.args ?? globalThis.process?.argv?.slice(2) ?? [];
const [endpoint, runtime = "unknown", prefix, cutting] = args;

try {
  console.log(JSON.stringify(await observe({ endpoint, runtime, prefix, cutting })));
} catch (error) {
  console.log(JSON.stringify({ runtime, error: String(error?.stack ?? error) }));
  if (globalThis.Deno) globalThis.Deno.exitCode = 1;
  else globalThis.process.exitCode = 1;
}
