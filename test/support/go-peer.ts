// The Go peer (scripts/etcd-go/cmd/peer): etcd's own client/v3/concurrency at the member's version, driven over
// its stdin and stdout, one JSON object per line. The interop tests use it to contend with Go's Mutex and
// Election; `npm run bench` times it beside the SDK. Built with the member (scripts/lib/etcd-versions.sh), so
// only the versions built from Go (3.6, 3.7) have one. Node-only, no vitest import.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { onLines } from "./processes.ts";

/** One JSON line the peer wrote, with when the test saw it. */
export interface PeerLine {
  readonly event?: string;
  readonly at: number;
  readonly [field: string]: unknown;
}

export interface GoPeer {
  readonly child: ChildProcess;
  /** Every line so far. */
  readonly lines: PeerLine[];
  /** The first line (from `from` on) for which `match` holds, waiting up to `ms`. */
  next(match: (line: PeerLine) => boolean, ms: number, from?: number): Promise<PeerLine>;
  /** Writes one command line (`write <key> <value>`, `unlock`, `resign`). */
  send(command: string): void;
  readonly exited: Promise<number | null>;
  stderr(): string;
  kill(): void;
}

/** The peer binary beside `binDir`'s etcd, or a message saying it is not built there. */
export function goPeerPath(binDir: string): string {
  const path = join(binDir, "peer");
  if (!existsSync(path)) {
    throw new Error(`no Go peer in ${binDir}: it is built with etcd 3.6 and later (scripts/lib/etcd-versions.sh)`);
  }
  return path;
}

/** Starts `peer <command> <endpoint> ...args`. The caller kills it (or lets it exit). */
export function startGoPeer(binDir: string, command: string, endpoint: string, ...args: string[]): GoPeer {
  const child = spawn(goPeerPath(binDir), [command, endpoint, ...args], { stdio: ["pipe", "pipe", "pipe"] });
  const lines: PeerLine[] = [];
  const waiters = new Set<() => void>();
  let errText = "";
  onLines(
    child.stdout!,
    (text) => lines.push({ ...JSON.parse(text), at: performance.now() }),
    () => {
      for (const wake of waiters) wake();
    },
  );
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (errText += chunk));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  void exited.then(() => {
    for (const wake of waiters) wake();
  });
  const next = (match: (line: PeerLine) => boolean, ms: number, from = 0): Promise<PeerLine> =>
    new Promise((resolve, reject) => {
      const look = () => {
        const found = lines.slice(from).find(match);
        if (found !== undefined) return done(() => resolve(found));
        if (child.exitCode !== null) {
          done(() => reject(new Error(`the Go peer exited (${child.exitCode}): ${errText.trim()}`)));
        }
      };
      const timer = setTimeout(
        () => done(() => reject(new Error(`the Go peer said nothing matching in ${ms} ms: ${errText.trim()}`))),
        ms,
      );
      const done = (settle: () => void) => {
        clearTimeout(timer);
        waiters.delete(look);
        settle();
      };
      waiters.add(look);
      look();
    });
  return {
    child,
    lines,
    next,
    send: (command) => child.stdin!.write(`${command}\n`),
    exited,
    stderr: () => errText,
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    },
  };
}
