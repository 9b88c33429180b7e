// Child processes for tests: bounded in time and killed with the test process (SIGKILL on parent death when
// setpriv exists, and on exit otherwise). No vitest import: the runtimes project's global setup uses it too.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import type { Readable } from "node:stream";

const SETPRIV = "/usr/bin/setpriv";
const hasSetpriv = existsSync(SETPRIV);

/** Whether process `pid` lives (one of another user counts). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Calls `line` with each non-empty line `stream` writes (text, as it arrives), then `chunk` once per chunk. */
export function onLines(stream: Readable, line: (text: string) => void, chunk?: () => void): void {
  let buffered = "";
  stream.setEncoding("utf8").on("data", (data: string) => {
    buffered += data;
    const parts = buffered.split("\n");
    buffered = parts.pop()!;
    for (const text of parts) if (text.length > 0) line(text);
    chunk?.();
  });
}

/**
 * `command` and its arguments, run through `setpriv --pdeathsig KILL` where setpriv exists: a SIGKILLed test
 * process runs no hooks, but the kernel still kills what it started.
 */
export function killedWithParent(command: string, args: readonly string[]): [file: string, args: string[]] {
  return hasSetpriv ? [SETPRIV, ["--pdeathsig", "KILL", "--", command, ...args]] : [command, [...args]];
}

const children = new Set<ChildProcess>();
let hooksInstalled = false;

function killChildren(): void {
  for (const child of children) {
    try {
      child.kill("SIGKILL");
    } catch {
      // Already gone.
    }
  }
  children.clear();
}

function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on("exit", killChildren);
}

export interface ProcessResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

export interface SpawnOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  timeoutMs: number;
}

/** Starts `command` with parent-death SIGKILL; the caller must `kill()` it (or let it exit). */
export function spawnChild(command: string, args: string[], options: Omit<SpawnOptions, "timeoutMs">): ChildProcess {
  installHooks();
  const [file, argv] = killedWithParent(command, args);
  const child = spawn(file, argv, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  child.once("exit", () => children.delete(child));
  child.once("error", () => children.delete(child));
  return child;
}

/** Runs `command` to completion, SIGKILLed after `timeoutMs`. Never rejects: spawn errors come back as code null. */
export function runProcess(command: string, args: string[], options: SpawnOptions): Promise<ProcessResult> {
  return new Promise((resolve) => {
    const child = spawnChild(command, args, options);
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, options.timeoutMs);
    child.once("error", (error) => {
      clearTimeout(timer);
      resolve({ code: null, signal: null, stdout, stderr: `${stderr}${error.message}`, timedOut });
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, timedOut });
    });
  });
}

export function tail(text: string, lines = 30): string {
  return text.trimEnd().split("\n").slice(-lines).join("\n");
}

/** A minimal environment: nothing of vitest's (NODE_OPTIONS, VITEST_*) leaks into the runtime under test. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const keep = ["PATH", "HOME", "TMPDIR", "LANG", "TZ"];
  const env: NodeJS.ProcessEnv = { NO_COLOR: "1", DO_NOT_TRACK: "1" };
  for (const name of keep) if (process.env[name] !== undefined) env[name] = process.env[name];
  return { ...env, ...extra };
}
