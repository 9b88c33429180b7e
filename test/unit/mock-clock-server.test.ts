// The wall clock, the mock served over real HTTP on a loopback port (etcd-edge/testing/server), and its command.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Etcd } from "../../src/index.js";
import { createMockEtcd } from "../../src/testing/index.js";
import { serveMockEtcd, type MockEtcdServer } from "../../src/testing/server/index.js";
import { until, within } from "../support/async.js";
import { b64 } from "../support/wire.js";

const root = fileURLToPath(new URL("../..", import.meta.url));

let scratch: string;
beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), "etcd-edge-mock-test-"));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Bundles a source entry to a plain .mjs file node can run. */
async function bundle(entry: string, name: string): Promise<string> {
  const outfile = join(scratch, name);
  await build({
    entryPoints: [join(root, entry)],
    bundle: true,
    platform: "node",
    format: "esm",
    outfile,
    logLevel: "silent",
  });
  return outfile;
}

/** Runs node on a script; resolves with its exit code, stdout, and how long it ran. */
function runNode(
  args: string[],
  onStdout?: (text: string, kill: () => void) => void,
): Promise<{ code: number | null; out: string; ms: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      onStdout?.(out, () => child.kill("SIGTERM"));
    });
    child.once("error", reject);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, out, ms: performance.now() - started });
    });
  });
}

describe("wall clock", () => {
  it("leases expire by themselves: the key goes and watchers see it, with no advance() and no request", async () => {
    const mock = createMockEtcd({ clock: "wall" });
    const etcd = new Etcd({ endpoints: ["http://etcd.test:2379"], fetch: mock.fetch as never });
    const { id } = await etcd.lease.grant(2);
    await etcd.put("w/k", "v", { lease: id });
    const abort = new AbortController();
    const events: string[] = [];
    const watching = (async () => {
      for await (const { events: evs } of etcd.watch({ prefix: "w/", signal: abort.signal }))
        for (const e of evs) events.push(`${e.type} ${e.kv.key}`);
    })().catch(() => {});
    const start = performance.now();
    await until("the key expired", 4_000, () => mock.get("w/k") === undefined, 20);
    const elapsed = performance.now() - start;
    expect(elapsed).toBeGreaterThan(1_500);
    await until("the watcher saw the delete", 1_000, () => events.includes("delete w/k"));
    abort.abort();
    await watching;
    mock.close();
  });

  it("advance() skips a wall clock ahead; a virtual clock stands still", async () => {
    const wall = createMockEtcd({ clock: "wall" });
    const before = wall.now();
    wall.advance(10_000);
    expect(wall.now() - before).toBeGreaterThanOrEqual(10_000);
    wall.close();
    const virtual = createMockEtcd();
    await new Promise((r) => setTimeout(r, 20));
    expect(virtual.now()).toBe(0);
  });

  it("its timer never keeps a Node process alive", async () => {
    const testing = await bundle("src/testing/index.ts", "testing.mjs");
    const script = `const { createMockEtcd } = await import(${JSON.stringify(testing)});
      const mock = createMockEtcd({ clock: "wall" });
      const res = await mock.fetch("http://x/v3/lease/grant", { method: "POST", body: '{"TTL":3600}' });
      console.log((await res.json()).TTL);`;
    const { code, out, ms } = await runNode(["--input-type=module", "-e", script]);
    expect([code, out.trim()]).toEqual([0, "3600"]);
    expect(ms).toBeLessThan(10_000);
  });
});

describe("etcd-edge/testing/server", () => {
  let server: MockEtcdServer;
  beforeAll(async () => {
    server = await serveMockEtcd({ version: "3.5" });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("serves the SDK over real HTTP on a loopback port: KV, lease keepalive, streaming watch, locks", async () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const etcd = new Etcd({ endpoints: [server.url] });
    await etcd.put("s/a", "1");
    expect((await etcd.get("s/a"))?.value).toBe("1");
    const { id } = await etcd.lease.grant(30);
    expect((await etcd.lease.keepAliveOnce(id)).ttl).toBe(30);

    const abort = new AbortController();
    const iterator = etcd.watch({ prefix: "s/", signal: abort.signal })[Symbol.asyncIterator]();
    const first = iterator.next();
    await until("the watch stream is open", 2_000, () => server.mock.openWatchStreams === 1);
    await etcd.put("s/b", "2");
    const { value } = await within(2_000, "a watch event over HTTP", first);
    expect(
      value!.events.map(
        (e: { type: string; kv: { key: string; value: string } }) => `${e.type} ${e.kv.key}=${e.kv.value}`,
      ),
    ).toEqual(["put s/b=2"]);
    abort.abort();
    await until("the stream closed", 2_000, () => server.mock.openWatchStreams === 0);

    const seen = await etcd.withLock("s/lock", async (lock) => lock.revision, { ttl: 5 });
    expect(seen).toBeGreaterThan(0);
    const members = (await (
      await fetch(`${server.url}/v3/cluster/member/list`, { method: "POST", body: "{}" })
    ).json()) as { members: { clientURLs: string[] }[] };
    expect(members.members[0]!.clientURLs).toEqual([server.url]);
  });

  it("holds a v3lock request open until acquired, and streams keepalive answers after the body", async () => {
    const post = (path: string, body: string, signal?: AbortSignal) =>
      fetch(`${server.url}${path}`, { method: "POST", body, ...(signal ? { signal } : {}) });
    const held = (await (await post("/v3/lock/lock", JSON.stringify({ name: b64("h") }))).json()) as { key: string };
    const waiting = post("/v3/lock/lock", JSON.stringify({ name: b64("h") }));
    await until("two in line", 2_000, () => server.mock.keys("h/").length === 2);
    await post("/v3/lock/unlock", JSON.stringify({ key: held.key }));
    const next = (await (await within(2_000, "the second lock", waiting)).json()) as { key: string };
    expect(atob(next.key)).toMatch(/^h\/[0-9a-f]+$/);
    const lines = (await (await post("/v3/lease/keepalive", '{"ID":"1"}{"ID":"2"}')).text()).trim().split("\n");
    expect(lines.map((l) => (JSON.parse(l) as { result: { ID: string } }).result.ID)).toEqual(["1", "2"]);
  });

  it("a request etcd drops closes the connection unanswered (3.4)", async () => {
    const s34 = await serveMockEtcd({ version: "3.4", clock: "virtual" });
    try {
      await expect(fetch(`${s34.url}/v3/kv/txn`, { method: "POST", body: '{"compare":[null]}' })).rejects.toThrow(
        TypeError,
      );
      expect((await fetch(`${s34.url}/version`)).status).toBe(200);
    } finally {
      await s34.close();
    }
  });
});

describe("npx etcd-edge-mock", () => {
  it("listens on the port given (0: any), prints its URL, answers, and exits 0 on SIGTERM", async () => {
    const cli = await bundle("src/testing/server/cli.ts", "etcd-edge-mock.mjs");
    let answered: Promise<unknown> | undefined;
    const { code, out } = await runNode([cli, "--port", "0", "--etcd-version", "3.7"], (text, kill) => {
      const url = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(text)?.[1];
      if (!url || answered) return;
      answered = (async () => {
        const version = (await (await fetch(`${url}/version`)).json()) as { etcdserver: string };
        const put = await fetch(`${url}/v3/kv/put`, {
          method: "POST",
          body: JSON.stringify({ key: b64("k"), value: b64("v") }),
        });
        return [version.etcdserver, put.status];
      })().finally(kill);
    });
    expect(await answered).toEqual(["3.7.3", 200]);
    expect(out).toMatch(/etcd 3\.7 gateway on http:\/\/127\.0\.0\.1:\d+ \(wall clock\)/);
    expect(code).toBe(0);
    expect((await runNode([cli, "--etcd-version", "3.8"])).code).toBe(2);
  });
});
