#!/usr/bin/env node
// `npx etcd-edge locks …`: the operator's view of the locks in an etcd (cli.ts). Node only.
import { runCli } from "./cli.js";

const interrupt = new AbortController();
process.once("SIGINT", () => interrupt.abort());
process.exitCode = await runCli(process.argv.slice(2), {
  env: process.env,
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
  signal: interrupt.signal,
});
