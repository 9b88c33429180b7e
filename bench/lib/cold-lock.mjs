// A fresh process's first lock (cold-child.mjs), started without blocking this process: the delay relay
// runs here and must keep relaying while the child works.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";

const CHILD = fileURLToPath(new URL("./cold-child.mjs", import.meta.url));

/** `spec` as cold-child.mjs takes it; resolves to its { importMs, firstMs, requests, warmMs? }. */
export function coldLock(spec, { timeout = 60_000, nodeArgs = [] } = {}) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [...nodeArgs, CHILD, JSON.stringify(spec)], { timeout }, (error, stdout, stderr) => {
      if (error)
        reject(new Error(`cold ${spec.who} (${spec.fetch ?? "grpc"}): ${stderr.slice(-400) || error.message}`));
      else resolve(JSON.parse(stdout.trim().split("\n").at(-1)));
    });
  });
}
