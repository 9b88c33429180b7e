// Drives runtime.mjs (beside this file) from a test: one child process is one Lambda sandbox.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { within } from "../../support/async.js";
import { killedWithParent } from "../../support/processes.js";

const RUNTIME = fileURLToPath(new URL("./runtime.mjs", import.meta.url));
const DIST = fileURLToPath(new URL("../../../dist/index.js", import.meta.url));

export interface InvocationMeta {
  pid: number;
  handlerLoads: number;
  invocation: number;
  coldStart: boolean;
}

export interface Invocation<T = unknown> {
  result?: T;
  error?: { name: string; message: string };
  meta: InvocationMeta;
  logs: Array<{ level: string; message: string }>;
}

type Message =
  | { type: "ready"; pid: number; handlerLoads: number }
  | { type: "log"; id: number | undefined; level: string; message: string }
  | { type: "result"; id: number; result: unknown; meta: InvocationMeta }
  | { type: "error"; id: number | null; error: { name: string; message: string }; meta: InvocationMeta };

export interface Sandbox {
  readonly pid: number;
  /** Sends one invocation; resolves when the runtime answers (rejects if it has not after `waitMs`). */
  invoke<T = unknown>(
    event: unknown,
    options?: { timeoutMs?: number; waitMs?: number },
  ): {
    id: number;
    done: Promise<Invocation<T>>;
  };
  /** Resolves with the first log line of invocation `id` that `match` accepts (parsed as JSON when it is). */
  waitForLog(id: number, match: (entry: any) => boolean, waitMs: number): Promise<any>;
  freeze(): void;
  thaw(): void;
  /** SIGKILL (works on a stopped process too) and wait for exit. */
  kill(): Promise<void>;
  /** Everything the child wrote to stderr, for failure messages. */
  stderr(): string;
}

const live = new Set<ChildProcessWithoutNullStreams>();
process.once("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

/** Starts a sandbox running `handler` (default: examples/lambda/handler.mjs) with `env` added. */
export async function startSandbox(
  env: Record<string, string>,
  options: { handler?: string; readyMs?: number } = {},
): Promise<Sandbox> {
  if (!existsSync(DIST)) {
    throw new Error(`${DIST} is missing: the sandbox imports "etcd-edge" from the build; run \`npm run build\` first`);
  }
  const node = process.execPath;
  const handler = options.handler === undefined ? [] : [options.handler];
  const [command, args] = killedWithParent(node, [RUNTIME, ...handler]);
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"] });
  live.add(child);
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  void exited.then(() => live.delete(child));

  const logs = new Map<number, Array<{ level: string; message: string }>>();
  const pending = new Map<number, { resolve: (i: Invocation<any>) => void; reject: (e: Error) => void }>();
  const logWaiters = new Set<{ id: number; match: (entry: any) => boolean; resolve: (entry: any) => void }>();
  let ready: ((pid: number) => void) | undefined;
  const readyPromise = new Promise<number>((resolve) => (ready = resolve));

  const parse = (message: string): unknown => {
    try {
      return JSON.parse(message);
    } catch {
      return message;
    }
  };

  createInterface({ input: child.stdout }).on("line", (line) => {
    const message = JSON.parse(line) as Message;
    switch (message.type) {
      case "ready":
        ready?.(message.pid);
        break;
      case "log": {
        if (message.id === undefined) break;
        const list = logs.get(message.id) ?? [];
        list.push({ level: message.level, message: message.message });
        logs.set(message.id, list);
        const entry = parse(message.message);
        for (const waiter of logWaiters) {
          if (waiter.id === message.id && waiter.match(entry)) {
            logWaiters.delete(waiter);
            waiter.resolve(entry);
          }
        }
        break;
      }
      case "result":
      case "error": {
        const id = message.id ?? -1;
        const settle = pending.get(id);
        pending.delete(id);
        const invocation: Invocation = { meta: message.meta, logs: logs.get(id) ?? [] };
        if (message.type === "result") invocation.result = message.result;
        else invocation.error = message.error;
        settle?.resolve(invocation);
        break;
      }
    }
  });
  void exited.then(() => {
    for (const [id, { reject }] of pending) reject(new Error(`sandbox exited during invocation ${id}:\n${stderr}`));
    pending.clear();
  });

  const pid = await within(
    options.readyMs ?? 10_000,
    "sandbox ready",
    Promise.race([
      readyPromise,
      exited.then(() => {
        throw new Error(`sandbox exited before it was ready:\n${stderr}`);
      }),
    ]),
  );

  let nextId = 1;
  return {
    pid,
    invoke<T>(event: unknown, options: { timeoutMs?: number; waitMs?: number } = {}) {
      const id = nextId++;
      const timeoutMs = options.timeoutMs ?? 15_000;
      const done = new Promise<Invocation<T>>((resolve, reject) => pending.set(id, { resolve, reject }));
      child.stdin.write(`${JSON.stringify({ id, event, timeoutMs })}\n`);
      return { id, done: within(options.waitMs ?? timeoutMs + 5_000, `invocation ${id}`, done) };
    },
    waitForLog(id, match, waitMs) {
      const seen = (logs.get(id) ?? []).map((l) => parse(l.message)).find(match);
      if (seen !== undefined) return Promise.resolve(seen);
      return within(
        waitMs,
        `log line of invocation ${id}`,
        new Promise((resolve) => logWaiters.add({ id, match, resolve })),
      );
    },
    freeze: () => process.kill(pid, "SIGSTOP"),
    thaw: () => process.kill(pid, "SIGCONT"),
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await within(5_000, "sandbox exit", exited);
    },
    stderr: () => stderr,
  };
}
