// Memory near each cap, as the process's resident memory shows it: a 300 MiB answer, a watch line that never
// ends and an endless error body, each from a loopback server that generates its bytes as it sends them. The
// client runs in a child process (`--expose-gc`, nothing else loaded), which measures the growth of its peak
// resident memory (Linux's VmHWM, reset just before the call) over its resident memory after a collection.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { header } from "../support/wire.js";
import { httpLoopback, type HttpLoopback, pour } from "../support/loopback.js";
import { REPO_ROOT } from "../support/neutral-bundle.js";
import { runProcess, tail } from "../support/processes.js";

const MiB = 1024 * 1024;
const HUGE = 300 * MiB;

/**
 * The child: the same refused call three times at a small cap first (so that code compiled, connections
 * opened and pools filled on the way are not counted), then a collection, then the call at the cap given.
 */
const CHILD = `
import { readFileSync, writeFileSync } from "node:fs";
import { Etcd } from "./src/index.js";
import { createNodeFetch } from "./src/node/index.js";

const [url, via, what, cap] = process.argv.slice(2);
const fetch = via === "node" ? createNodeFetch() : undefined;
const options = { endpoints: url, fetch, retries: 0, timeout: 60_000 };
const status = () => readFileSync("/proc/self/status", "utf8");
const kib = (field) => Number(status().match(new RegExp(field + ":\\\\s+(\\\\d+)"))[1]);
async function call(etcd) {
  if (what === "range") return etcd.range({ prefix: "huge" });
  if (what === "error") return etcd.put("error", "v");
  for await (const _ of etcd.watch({ key: "huge", retries: 0 })) {}
}
const warm = new Etcd({ ...options, maxResponseBytes: 256 * 1024 });
for (let i = 0; i < 3; i++) await call(warm).catch(() => {});
const etcd = new Etcd({ ...options, maxResponseBytes: Number(cap) });
globalThis.gc();
globalThis.gc();
await new Promise((resolve) => setTimeout(resolve, 50));
writeFileSync("/proc/self/clear_refs", "5");
const before = kib("VmRSS");
const outcome = await call(etcd).then(() => "no error", (error) => error.code ?? String(error));
console.log(JSON.stringify({ outcome, growth: (kib("VmHWM") - before) * 1024 }));
process.exit(0);
`;

let server: HttpLoopback;
let scratch: string;
let child: string;

beforeAll(async () => {
  server = await httpLoopback();
  server.handle((request, response, body) => {
    if (request.url === "/v3/watch") {
      response.writeHead(200, { "content-type": "application/json" });
      response.write(`{"result":{"header":${JSON.stringify(header())},"created":true}}\n{"result":{"events":[`);
      return pour(response, Buffer.alloc(64 * 1024, "w"), HUGE);
    }
    if (body.includes(btoa("error"))) {
      response.writeHead(502, { "content-type": "text/html" });
      return pour(response, Buffer.alloc(64 * 1024, "e"), HUGE);
    }
    response.writeHead(200, { "content-type": "application/json" });
    response.write(`{"header":${JSON.stringify(header())},"kvs":[{"key":"`);
    pour(response, Buffer.alloc(64 * 1024, "a"), HUGE);
  });
  scratch = mkdtempSync(join(tmpdir(), "etcd-edge-memory-"));
  child = join(scratch, "child.mjs");
  await build({
    stdin: { contents: CHILD, resolveDir: REPO_ROOT, loader: "ts", sourcefile: "memory-child.ts" },
    bundle: true,
    platform: "node",
    format: "esm",
    outfile: child,
    // undici, bundled in, requires Node's modules at run time.
    banner: { js: 'import { createRequire } from "node:module"; const require = createRequire(import.meta.url);' },
    logLevel: "silent",
  });
}, 30_000);

afterAll(async () => {
  await server?.close();
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
});

/** The call `what` made through `via` in a fresh child: what it failed with, and its peak memory growth. */
async function measure(via: "global" | "node", what: "range" | "watch" | "error", cap: number) {
  const result = await runProcess(process.execPath, ["--expose-gc", child, server.url, via, what, String(cap)], {
    cwd: REPO_ROOT,
    timeoutMs: 60_000,
  });
  const line = result.stdout.trim().split("\n").at(-1) ?? "";
  if (result.code !== 0 || !line.startsWith("{")) {
    throw new Error(
      `the child failed (${result.code ?? result.signal}):\n${tail(result.stderr)}\n${tail(result.stdout)}`,
    );
  }
  return JSON.parse(line) as { outcome: string; growth: number };
}

/**
 * etcd-edge/node, at the default cap: the SDK holds the socket reads undici hands it, as they are, and nothing
 * else. Measured: cap + 1-3 MiB; before, 49-52 MiB (a buffer grown by doubling, every read copied into it).
 */
const NODE = { cap: 16 * MiB, bound: 16 * MiB + 8 * MiB };
/**
 * The global fetch (undici) allocates each byte it delivers more than once (its socket read, the copy its
 * stream hands out), freed when the collector gets to them: a bare read of 32 MiB that keeps nothing grows
 * the process by 44-54 MiB. The SDK keeps undici's copies rather than making its own, so it adds little to
 * that: measured 51-65 MiB; before, 100-116 MiB. At the default cap the two are closer than the collector's
 * noise (36-49 against 54-70 MiB): a cap of 32 MiB tells them apart, as the SDK's share grows with the cap.
 */
const GLOBAL = { cap: 32 * MiB, bound: 32 * MiB + 48 * MiB };
/** An error body is read to a 64 KiB preview: a few MiB at most, whatever the fetch. */
const ERROR_BOUND = 8 * MiB;

describe.each([
  ["etcd-edge/node's fetch", "node", NODE],
  ["the global fetch", "global", GLOBAL],
] as const)("through %s", (_name, via, { cap, bound }) => {
  it("a 300 MiB range answer is RESOURCE_EXHAUSTED at the cap, the process growing by at most the bound", async () => {
    const { outcome, growth } = await measure(via, "range", cap);
    expect(outcome).toBe("RESOURCE_EXHAUSTED");
    expect(growth / MiB).toBeLessThan(bound / MiB);
  }, 60_000);

  it("a 300 MiB watch line without a newline ends the watch at the cap, within the same bound", async () => {
    const { outcome, growth } = await measure(via, "watch", cap);
    expect(outcome).toBe("RESOURCE_EXHAUSTED");
    expect(growth / MiB).toBeLessThan(bound / MiB);
  }, 60_000);

  it("an endless 502 body is read to its preview only: BAD_RESPONSE, the process growing by a few MiB", async () => {
    const { outcome, growth } = await measure(via, "error", cap);
    expect(outcome).toBe("BAD_RESPONSE");
    expect(growth / MiB).toBeLessThan(ERROR_BOUND / MiB);
  }, 60_000);
});
