// The fence control of issue 39, in the lock-set style of Jepsen, shared by `fence-control.test.ts` (npm test: one
// round per store and fence setting, etcd alone) and `npm run chaos` (rounds all through the fault period, etcd
// behind its fault proxies). Worker processes (worker.mjs, on the built package) increment one counter in a store
// under one lock. One holder (the victim) reads the counter and is frozen (SIGSTOP) past its 2 s lease; the others
// take the lock and increment; the victim resumes and writes what it read plus one, as a holder that still
// believes it holds. Without a fence the store ends behind the increments acknowledged; with etcd-edge/fence it
// ends exact, and the victim's write is refused with LOCK_LOST.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { killedWithParent, onLines } from "../support/processes.ts";
import { startMiniflare, startMoto, startPostgres } from "../support/stores.ts";

const WORKER = new URL("./worker.mjs", import.meta.url).pathname;

export type StoreName = "postgres" | "sqlite" | "d1" | "r2" | "s3" | "dynamodb";
export const STORES: readonly StoreName[] = ["postgres", "sqlite", "d1", "r2", "s3", "dynamodb"];

/** How a worker reaches a store: a server's URL, or SQLite's file. */
export type Conn = { url?: string; file?: string };

type Event = { event: string; value?: number; token?: number; code?: string; message?: string };

/** Every store started (SQLite: a temp dir for its file), and how to stop them all. */
export interface Stores {
  conns: Record<StoreName, Conn>;
  stop(): Promise<void>;
}

export async function startStores(): Promise<Stores> {
  const [postgres, moto, miniflare] = await Promise.all([
    startPostgres(),
    startMoto(),
    startMiniflare(new URL("./cloudflare-worker.mjs", import.meta.url).pathname),
  ]);
  const sqliteDir = mkdtempSync(join(tmpdir(), "etcd-edge-sqlite-"));
  return {
    conns: {
      postgres: { url: postgres.url },
      sqlite: { file: join(sqliteDir, "store.db") },
      d1: { url: miniflare.url },
      r2: { url: miniflare.url },
      s3: { url: moto.url },
      dynamodb: { url: moto.url },
    },
    async stop() {
      await Promise.all([postgres, moto, miniflare].map((store) => store.stop()));
      rmSync(sqliteDir, { recursive: true, force: true });
    },
  };
}

/** A worker process in `role`: its JSON events as they come, and its end. */
function run(config: Record<string, unknown>) {
  const [file, args] = killedWithParent(process.execPath, [WORKER, JSON.stringify(config)]);
  const child: ChildProcess = spawn(file, args, { stdio: ["pipe", "pipe", "pipe"] });
  const events: Event[] = [];
  const waiters: Array<() => void> = [];
  let stderr = "";
  onLines(child.stdout!, (line) => {
    events.push(JSON.parse(line) as Event);
    for (const wake of waiters.splice(0)) wake();
  });
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const ended = new Promise<number | null>((resolve) => child.once("exit", resolve));
  /** The first event named one of `names`, within `ms`. */
  const next = async (names: string | string[], ms = 60_000): Promise<Event> => {
    const wanted = typeof names === "string" ? [names] : names;
    const deadline = performance.now() + ms;
    for (;;) {
      const found = events.find((e) => wanted.includes(e.event));
      if (found !== undefined) return found;
      if (child.exitCode !== null || performance.now() > deadline) {
        const what = `"${wanted.join('" or "')}" from the ${String(config.role)}`;
        throw new Error(`no ${what} (exit ${child.exitCode}):\n${stderr}`);
      }
      await new Promise<void>((resolve) => {
        waiters.push(resolve);
        setTimeout(resolve, 200);
      });
    }
  };
  return { child, events, next, ended };
}

/** One round's setting: the store, fenced or not, etcd's endpoints, and the names it may use. */
export interface Round {
  store: StoreName;
  conn: Conn;
  fenced: boolean;
  endpoints: string[];
  /** The lock's name; the store's resource is named after it. */
  name: string;
  /** Workers after the victim, and the increments each makes. */
  workers: number;
  increments: number;
}

export interface Outcome {
  /** What the victim read before it was frozen. */
  read: number;
  /** Its write after it resumed: `wrote`, or `refused` with the error's code and message. */
  victim: Event;
  /** The increments the store acknowledged to the workers, each under the lock as they believed. */
  incremented: number;
  final: number;
  /** What the store lost of what it acknowledged (the victim's write included when it landed). */
  lost: number;
}

/** The control: the victim's stale write after the others' increments, fenced or not. */
export async function control(round: Round): Promise<Outcome> {
  const config = {
    store: round.store,
    conn: round.conn,
    resource: round.name.replaceAll("/", "-"),
    fenced: round.fenced,
    etcd: round.endpoints,
    name: round.name,
  };
  const setup = run({ ...config, role: "setup" });
  await setup.next("ready");
  await setup.ended;

  const victim = run({ ...config, role: "victim" });
  const read = await victim.next("read");
  victim.child.kill("SIGSTOP");
  victim.child.stdin!.write("write\n");
  // The others wait in line until the frozen victim's lease ends (2 s), then increment.
  const workers = Array.from({ length: round.workers }, () =>
    run({ ...config, role: "worker", increments: round.increments }),
  );
  let incremented = 0;
  for (const worker of workers) {
    await worker.next("done", 120_000);
    incremented += worker.events.filter((e) => e.event === "incremented").length;
  }
  victim.child.kill("SIGCONT");
  const outcome = await victim.next(["wrote", "refused"]);
  await victim.ended;

  const reader = run({ ...config, role: "read" });
  const final = (await reader.next("value")).value!;
  const acknowledged = incremented + (outcome.event === "wrote" ? 1 : 0);
  return { read: read.value!, victim: outcome, incremented, final, lost: acknowledged - final };
}
