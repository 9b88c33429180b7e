// The packed etcd-edge, imported by name and bundled with esbuild as for Cloudflare, in a module Worker
// (no nodejs_compat) served by workerd, against real etcd on loopback, each version's. Two requests run the
// scenario in the same isolate, as a deployed Worker would. Then one isolate's client with auth on, shared by
// its requests.
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../support/async.js";
import { addUser, enableAuth, startEtcd } from "../support/etcd-members.js";
import { ETCD_VERSIONS, etcdBinaries } from "../support/etcd-versions.js";
import {
  bundleWorker,
  ensureRuntime,
  etcdEndpoint,
  expectScenario,
  INSTALL_TIMEOUT_MS,
  parseReport,
  recordingRelay,
  startWorkerd,
  uniquePrefix,
  workDir,
  workerdConfig,
  writeText,
  type WorkerdServer,
} from "../support/runtimes.js";

const COMPATIBILITY_DATE = "2026-11-01";

/**
 * workerd's output without its INFO line for an I/O task a JS abort ended: a fetch aborted after its answer came
 * (a watch the SDK stops) also rejects the task that sent its request body, with the abort's reason, and workerd
 * logs that task at INFO as an "uncaught exception" though the script handled the abort (cloudflare/workerd#1020;
 * `IoContext::logUncaughtExceptionAsync`). A rejection the script leaves unhandled is logged otherwise, and counts.
 */
function complaints(output: string): string {
  const abortedTask =
    /io-context\.c\+\+:\d+: info: uncaught exception; exception = \S+ failed: jsg\.DOMException\(AbortError\)/;
  return output
    .split("\n")
    .filter((line) => !abortedTask.test(line))
    .join("\n");
}

describe.each(ETCD_VERSIONS)("workerd on etcd %s", (etcd) => {
  let server: WorkerdServer | undefined;
  let inputs: string[] = [];

  beforeAll(async () => {
    const workerd = await ensureRuntime("workerd");
    const dir = workDir(`workerd-${etcd}`);
    ({ inputs } = await bundleWorker(dir));
    const config = join(dir, "config.capnp");
    writeText(config, workerdConfig(etcdEndpoint(etcd), COMPATIBILITY_DATE));
    server = await startWorkerd(workerd, config, dir);
  }, INSTALL_TIMEOUT_MS);

  afterAll(async () => {
    await server?.stop();
  });

  it("bundles etcd-edge from the temp project's node_modules", () => {
    expect(inputs).toContain("node_modules/etcd-edge/dist/index.js");
    expect(inputs.filter((input) => input.startsWith("node:"))).toEqual([]);
  });

  it.each([1, 2])(
    "request %i: locks, writes fenced, watches the write, unlocks, closes the session, then the same with withLock",
    async () => {
      const prefix = uniquePrefix("workerd");
      const response = await fetch(`${server!.url}/run?prefix=${encodeURIComponent(prefix)}`, {
        signal: AbortSignal.timeout(30_000),
      });
      const body = await response.text();
      const context = `HTTP ${response.status}\nworkerd output:\n${server!.output()}`;
      const report = parseReport(body, context);
      expect(report.error, context).toBeUndefined();
      expect(response.status, context).toBe(200);
      await expectScenario(report, { runtime: "workerd", prefix, etcd });
      // Nothing the SDK left behind (a timer, an unread body, a rejected promise) made workerd complain.
      expect(complaints(server!.output())).not.toMatch(/uncaught|unhandled|hanging promise|exception/i);
    },
  );
});

describe("workerd: one client per isolate with auth on", () => {
  const started: Array<() => Promise<void>> = [];
  let relay: Awaited<ReturnType<typeof recordingRelay>>;
  let server: WorkerdServer;
  beforeAll(async () => {
    const member = await startEtcd({ name: "workerd-auth", binDir: etcdBinaries("3.4").binDir });
    started.push(() => member.stop());
    await enableAuth(member, { rootPassword: "root-password" });
    await addUser(member, { rootPassword: "root-password", user: "app", password: "app-password", prefix: "app/" });
    relay = await recordingRelay(member.clientUrl);
    started.push(() => relay.close());
    const dir = workDir("workerd-auth");
    await bundleWorker(dir, "auth-worker.mjs");
    const config = join(dir, "config.capnp");
    const vars = { ETCD_USERNAME: "app", ETCD_PASSWORD: "app-password" };
    writeText(config, workerdConfig(relay.url, COMPATIBILITY_DATE, [], vars));
    server = await startWorkerd(await ensureRuntime("workerd"), config, dir);
    started.push(() => server.stop());
  }, INSTALL_TIMEOUT_MS);
  afterAll(async () => {
    for (const stop of started.reverse()) await stop();
  });

  it("a request that ends while its authenticate is unanswered leaves no dead login behind", async () => {
    const put = async (key: string, giveUpAfter?: number) => {
      const query = `key=${encodeURIComponent(key)}${giveUpAfter === undefined ? "" : `&giveUpAfter=${giveUpAfter}`}`;
      const response = await fetch(`${server.url}/put?${query}`, { signal: AbortSignal.timeout(30_000) });
      return { status: response.status, body: (await response.json()) as { ok: boolean; code?: string } };
    };

    // The isolate's first authenticate is never answered; its request gives up, answers, and ends.
    const arrived = relay.swallowNext("/v3/auth/authenticate");
    const first = put("app/first", 300);
    await arrived;
    expect(await first).toMatchObject({ status: 503, body: { ok: false, code: "ABORTED" } });
    // workerd cuts the unanswered authenticate with the request that sent it.
    await until("the first request's authenticate cut", 10_000, () => relay.inFlight() === 0);

    const context = () => `relay saw:\n${relay.paths().join("\n")}\nworkerd output:\n${server.output()}`;
    const later = [...(await Promise.all([1, 2, 3].map((i) => put(`app/together-${i}`)))), await put("app/after")];
    for (const answer of later) expect(answer, context()).toMatchObject({ status: 200, body: { ok: true } });
    // The lost login and one more, shared by every later request; each put sent once.
    expect(
      relay.paths().filter((path) => path === "/v3/auth/authenticate"),
      context(),
    ).toHaveLength(2);
    expect(
      relay.paths().filter((path) => path === "/v3/kv/put"),
      context(),
    ).toHaveLength(4);
  });

  it.each(["per-call", "shared"])(
    "8 requests at once on one lock with lease %s: every one takes it in turn through the isolate's client",
    async (lease) => {
      const name = `app/line-${lease}`;
      const answers = await Promise.all(
        Array.from({ length: 8 }, async () => {
          const response = await fetch(`${server.url}/lock?name=${name}&lease=${lease}`, {
            signal: AbortSignal.timeout(30_000),
          });
          return { status: response.status, body: (await response.json()) as { ok: boolean; revision?: string } };
        }),
      );
      const context = `relay saw:\n${relay.paths().join("\n")}\nworkerd output:\n${server.output()}`;
      for (const answer of answers) expect(answer, context).toMatchObject({ status: 200, body: { ok: true } });
      // Each held the lock under a token of its own.
      expect(new Set(answers.map((answer) => answer.body.revision)).size, context).toBe(8);
    },
  );

  it("a request that gives up while the shared lease's grant is unanswered fails alone", async () => {
    const lock = async (giveUpAfter?: number) => {
      const giveUp = giveUpAfter === undefined ? "" : `&giveUpAfter=${giveUpAfter}`;
      const query = `name=app/grant&lease=shared&ttl=7${giveUp}`;
      const response = await fetch(`${server.url}/lock?${query}`, { signal: AbortSignal.timeout(30_000) });
      const text = await response.text();
      expect(text.startsWith("{"), `${text}\nworkerd output:\n${server.output()}`).toBe(true);
      return { status: response.status, body: JSON.parse(text) as { ok: boolean; code?: string } };
    };
    const before = relay.paths().length;
    const arrived = relay.swallowNext("/v3/lease/grant");
    const first = lock(300);
    await arrived;
    // The second waits on the grant the first sent; the first gives up, answers, and ends.
    const second = lock();
    expect(await first).toMatchObject({ status: 503, body: { ok: false, code: "ABORTED" } });
    const context = () => `relay saw:\n${relay.paths().join("\n")}\nworkerd output:\n${server.output()}`;
    expect(await second, context()).toMatchObject({ status: 200, body: { ok: true } });
    expect(await lock(), context()).toMatchObject({ status: 200, body: { ok: true } });
    // The grant cut with the first request, and one more shared by the others.
    const grants = relay
      .paths()
      .slice(before)
      .filter((path) => path === "/v3/lease/grant");
    expect(grants, context()).toHaveLength(2);
  });
});
