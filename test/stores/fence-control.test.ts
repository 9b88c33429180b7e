// Fences where the data lives (issue 39), shown with a control that loses updates without them, in the lock-set
// style of Jepsen: worker processes increment one counter under one lock, on the built package and a real etcd.
// One holder (the victim) reads the counter and is frozen (SIGSTOP) past its 2 s lease; the others take the lock
// and increment; the victim resumes and writes what it read plus one, as a holder that still believes it holds.
// Without a fence the store ends behind the increments acknowledged (the control must show it, or it tests
// nothing); with etcd-edge/fence it ends exact, and the victim's write is refused with LOCK_LOST.
// Each store runs here for real, or as the closest stand-in (test/support/stores.ts): Postgres, SQLite
// (node:sqlite), D1 and R2 (Miniflare, i.e. workerd), S3 and DynamoDB (moto, an emulator).
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sharedEndpoint, uniqueName } from "../support/etcd.js";
import { killedWithParent, onLines } from "../support/processes.js";
import { type Store, startMiniflare, startMoto, startPostgres } from "../support/stores.js";

const WORKER = new URL("./worker.mjs", import.meta.url).pathname;
/** Two workers after the victim, each this many increments: the updates a lost write hides. */
const WORKERS = 2;
const INCREMENTS = 4;

type StoreName = "postgres" | "sqlite" | "d1" | "r2" | "s3" | "dynamodb";
type Conn = { url?: string; file?: string };
type Event = { event: string; value?: number; token?: number; code?: string; message?: string };

const started: Store[] = [];
const conns = {} as Record<StoreName, Conn>;
let sqliteDir: string;

beforeAll(async () => {
  const [postgres, moto, miniflare] = await Promise.all([
    startPostgres(),
    startMoto(),
    startMiniflare(new URL("./cloudflare-worker.mjs", import.meta.url).pathname),
  ]);
  started.push(postgres, moto, miniflare);
  sqliteDir = mkdtempSync(join(tmpdir(), "etcd-edge-sqlite-"));
  Object.assign(conns, {
    postgres: { url: postgres.url },
    sqlite: { file: join(sqliteDir, "store.db") },
    d1: { url: miniflare.url },
    r2: { url: miniflare.url },
    s3: { url: moto.url },
    dynamodb: { url: moto.url },
  });
}, 120_000);

afterAll(async () => {
  await Promise.all(started.map((store) => store.stop()));
  if (sqliteDir) rmSync(sqliteDir, { recursive: true, force: true });
});

/** A worker process in `role`; its JSON events as they come, and its end. */
function run(config: Record<string, unknown>) {
  const [file, args] = killedWithParent(process.execPath, [WORKER, JSON.stringify(config)]);
  const child = spawn(file, args, { stdio: ["pipe", "pipe", "pipe"] });
  const events: Event[] = [];
  const waiters: Array<() => void> = [];
  let stderr = "";
  onLines(child.stdout!, (line) => {
    events.push(JSON.parse(line) as Event);
    for (const wake of waiters.splice(0)) wake();
  });
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const ended = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const next = async (name: string, ms = 30_000): Promise<Event> => {
    const deadline = performance.now() + ms;
    for (;;) {
      const found = events.find((e) => e.event === name);
      if (found !== undefined) return found;
      if (child.exitCode !== null || performance.now() > deadline) {
        throw new Error(`no "${name}" from the ${String(config.role)} (exit ${child.exitCode}):\n${stderr}`);
      }
      await new Promise<void>((resolve) => {
        waiters.push(resolve);
        setTimeout(resolve, 200);
      });
    }
  };
  return { child, events, next, ended, stderr: () => stderr };
}

/** The control: the victim's stale write after the others' increments, fenced or not. */
async function control(store: StoreName, fenced: boolean) {
  const base = { store, conn: conns[store], resource: uniqueName(store).replace("/", "-"), fenced };
  const config = { ...base, etcd: sharedEndpoint(), name: uniqueName(`fence-${store}`) };
  const setup = run({ ...config, role: "setup" });
  await setup.next("ready");
  await setup.ended;

  const victim = run({ ...config, role: "victim" });
  const read = await victim.next("read");
  victim.child.kill("SIGSTOP");
  victim.child.stdin!.write("write\n");
  // The others wait in line until the frozen victim's lease ends (2 s), then increment.
  const workers = Array.from({ length: WORKERS }, () => run({ ...config, role: "worker", increments: INCREMENTS }));
  for (const worker of workers) await worker.next("done", 60_000);
  victim.child.kill("SIGCONT");
  const outcome = await Promise.race([victim.next("wrote"), victim.next("refused")]);
  await victim.ended;

  const reader = run({ ...config, role: "read" });
  const final = (await reader.next("value")).value!;
  const acknowledged = WORKERS * INCREMENTS + (outcome.event === "wrote" ? 1 : 0);
  return { read: read.value!, outcome, final, acknowledged, lost: acknowledged - final };
}

const stores: StoreName[] = ["postgres", "sqlite", "d1", "r2", "s3", "dynamodb"];

describe.each(stores)("%s", (store) => {
  it("without a fence, the frozen holder's write lands after the others': updates are lost", async () => {
    const result = await control(store, false);
    expect(result.read).toBe(0);
    expect(result.outcome.event).toBe("wrote");
    // The victim wrote 1 over the others' increments: all of them lost.
    expect(result.final).toBe(1);
    expect(result.lost).toBe(WORKERS * INCREMENTS);
  });

  it("with etcd-edge/fence, the store refuses it (LOCK_LOST) and ends exact", async () => {
    const result = await control(store, true);
    expect(result.outcome).toMatchObject({ event: "refused", code: "LOCK_LOST" });
    expect(result.outcome.message).toMatch(/fenced with token \d+ was refused/);
    expect(result.final).toBe(WORKERS * INCREMENTS);
    expect(result.lost).toBe(0);
  });
});
