// The operator's command (`npx etcd-edge locks …`) run in-process, as the bin runs it, with what it printed kept.
import { runCli } from "../../src/cli/cli.js";

/** Runs one command line with `env` as its whole environment; its exit code, stdout and stderr. */
export async function runCaptured(args: string[], env: Record<string, string>, signal?: AbortSignal) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, { env, out: (text) => out.push(text), err: (text) => err.push(text), signal });
  return { code, out: out.join("\n"), err: err.join("\n") };
}
