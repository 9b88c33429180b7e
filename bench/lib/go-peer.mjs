// Go's own client/v3/concurrency beside the SDK: the Go peer (scripts/etcd-go/cmd/peer), built with the etcd
// member of its version by scripts/lib/etcd-versions.sh. scripts/bench.sh names it in ETCD_EDGE_GO_PEER when
// the run's member has one (3.6, 3.7). Go speaks gRPC over one HTTP/2 connection to the member's client port,
// the gateway's clients HTTP/1.1 JSON: the rows compare what each protocol lets a client do.
import { spawn } from "node:child_process";

/** The peer binary of this run, or undefined (then the Go rows say why they are missing). */
export const GO_PEER = process.env.ETCD_EDGE_GO_PEER || undefined;
export const NO_GO_PEER =
  "no Go peer: it is built with etcd 3.6 and 3.7 (npm run bench -- --etcd 3.7, the default, has one)";

/** Runs `peer <command> <endpoint> ...args` to its end; resolves with its last JSON line. */
export function runGoPeer(command, endpoint, ...args) {
  if (!GO_PEER) return Promise.reject(new Error(NO_GO_PEER));
  return new Promise((resolve, reject) => {
    const child = spawn(GO_PEER, [command, endpoint, ...args.map(String)], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (chunk) => (out += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk) => (err += chunk));
    child.once("error", reject);
    child.once("exit", (code) => {
      const last = out.trim().split("\n").at(-1);
      if (code !== 0 || !last) reject(new Error(`the Go peer's ${command} failed (${code}): ${err.trim()}`));
      else resolve(JSON.parse(last));
    });
  });
}
