// The packed etcd-edge publishes on its diagnostics channels in every runtime that has diagnostics_channel:
// scenario/channels.mjs subscribes through the runtime's own module (Node 22 and 24, Deno, Bun from the command
// line; workerd with nodejs_compat as a module Worker), locks, fails a try, unlocks and runs withLock against
// real etcd, takes and releases every other recipe, loses a session and its lock, and follows a watch through a
// relay that cuts its streams; it reports the events each channel published.
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import {
  bundleWorker,
  ensureRuntime,
  etcdEndpoint,
  INSTALL_TIMEOUT_MS,
  RUN_TIMEOUT_MS,
  project,
  runCliScenario,
  type RuntimeName,
  startWorkerd,
  uniquePrefix,
  type WorkerdServer,
  workDir,
  workerdConfig,
  writeText,
} from "../support/runtimes.js";

/** What scenario/channels.mjs reports. */
interface Observed {
  runtime: string;
  error?: string;
  revision: number;
  refused: boolean;
  lock: string[];
  acquired: Array<{ kind: string; token: number; outcome: string }>;
  release: string[];
  released: Array<{ kind: string; token: number; outcome: string }>;
  withLock: string[];
  requests: number;
  recipes: Array<{ name: string; tokens: number[]; acquired: Ended[]; released: Ended[] }>;
  lost: { renewal: string; token: number; held: boolean };
  reconnect: string;
  points: Array<{ channel: string; kind?: string; name?: string; token?: number; code?: string; endpoint?: string }>;
}

type Ended = { kind: string; token?: number; outcome: string };

const OK = ["start", "end", "asyncStart", "asyncEnd"];
const FAILED = ["start", "end", "error", "asyncStart", "asyncEnd"];

function expectObserved(observed: Observed, runtime: RuntimeName): void {
  expect(observed.error).toBeUndefined();
  expect(observed.runtime).toBe(runtime);
  expect(observed.refused).toBe(true);
  // The lock, then the refused try: its error event carries LOCKED.
  expect(observed.lock).toEqual([...OK, ...FAILED]);
  expect(observed.acquired).toEqual([
    { kind: "lock", token: observed.revision, outcome: "acquired" },
    { kind: "lock", outcome: "LOCKED" },
  ]);
  expect(observed.release).toEqual(OK);
  expect(observed.released).toEqual([{ kind: "lock", token: observed.revision, outcome: "released" }]);
  expect(observed.withLock).toEqual(OK);
  expect(observed.requests).toBeGreaterThanOrEqual(4);
  // Every other recipe: its kind, its fencing token and its outcome, at its acquisition and at its release.
  const kinds = [["election"], ["semaphore"], ["read", "write"], ["lockAll"]];
  expect(observed.recipes).toHaveLength(kinds.length);
  observed.recipes.forEach(({ name, tokens, acquired, released }, i) => {
    const ended = (outcome: string) => kinds[i]!.map((kind, j) => ({ kind, token: tokens[j], outcome }));
    expect(Math.min(...tokens), name).toBeGreaterThan(0);
    expect(acquired, name).toEqual(ended("acquired"));
    expect(released, name).toEqual(ended("released"));
  });
  // A lease revoked from outside: the renewal finds it, and the session and its lock are published as lost.
  expect(observed.lost).toMatchObject({ renewal: "SESSION_EXPIRED", held: false });
  const lostName = expect.stringMatching(/lost$/);
  expect(observed.points.filter((p) => p.channel !== "watch.reconnect")).toEqual([
    { channel: "session.lost", code: "SESSION_EXPIRED" },
    { channel: "lock.lost", kind: "lock", name: lostName, token: observed.lost.token },
  ]);
  // A watch stream cut after etcd answered it is reopened, and the reopening is published with its cause.
  expect(observed.reconnect).toBe("published");
  expect(observed.points.find((p) => p.channel === "watch.reconnect")).toMatchObject({
    code: "UNAVAILABLE",
    endpoint: cutting!.url,
  });
}

/** In front of etcd: each connection is cut soon after etcd's first answer on it (a watch stream breaks). */
let cutting: TcpProxy | undefined;

beforeAll(async () => {
  cutting = await startTcpProxy(etcdEndpoint("3.4"), { cutAfterAnswerMs: 100 });
});

afterAll(async () => {
  await cutting?.close();
});

const rows: Array<{ runtime: RuntimeName; args: string[]; env?: (dir: string) => Record<string, string> }> = [
  { runtime: "node22", args: [] },
  { runtime: "node24", args: [] },
  {
    runtime: "deno",
    args: ["run", "--cached-only", "--no-lock", "--allow-net", "--allow-read", "--allow-env"],
    env: (dir) => ({ DENO_DIR: join(dir, ".deno"), DENO_NO_UPDATE_CHECK: "1", DENO_NO_PROMPT: "1" }),
  },
  { runtime: "bun", args: ["--no-install"], env: () => ({ BUN_RUNTIME_TRANSPILER_CACHE_PATH: "0" }) },
];

describe("diagnostics channels in each runtime", () => {
  it.for(rows)(
    "$runtime: a subscriber sees every recipe's acquisition and release, withLock, a loss and a watch's reopening",
    {
      timeout: INSTALL_TIMEOUT_MS + RUN_TIMEOUT_MS,
    },
    async (row) => {
      const binary = await ensureRuntime(row.runtime);
      const { report } = await runCliScenario(row.runtime, binary, row.args, {
        env: row.env?.(project()),
        etcd: "3.4",
        script: "channels-main.mjs",
        more: [cutting!.url],
      });
      expectObserved(report as unknown as Observed, row.runtime);
    },
  );

  describe("workerd with nodejs_compat", () => {
    let server: WorkerdServer | undefined;

    beforeAll(async () => {
      const workerd = await ensureRuntime("workerd");
      const dir = workDir("workerd-channels");
      await bundleWorker(dir, "channels-worker.mjs");
      const config = join(dir, "config.capnp");
      writeText(config, workerdConfig(etcdEndpoint(), "2026-11-01", ["nodejs_compat"]));
      server = await startWorkerd(workerd, config, dir);
    }, INSTALL_TIMEOUT_MS);

    afterAll(async () => {
      await server?.stop();
    });

    it("a subscriber in the Worker sees every recipe, withLock, a loss and a watch's reopening", async () => {
      const prefix = uniquePrefix("workerd-channels");
      const query = new URLSearchParams({ prefix, cutting: cutting!.url });
      const response = await fetch(`${server!.url}/run?${query}`, {
        signal: AbortSignal.timeout(30_000),
      });
      const observed = (await response.json()) as Observed;
      expect(observed.error, server!.output()).toBeUndefined();
      expectObserved(observed, "workerd");
    });
  });
});
