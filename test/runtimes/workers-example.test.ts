// examples/workers itself: the packed etcd-edge bundled with the example Worker as for Cloudflare (no
// nodejs_compat) and served by workerd against real etcd. Each request takes the order's lock with withLock
// and writes fenced; the store must show the last request's write and no lock left behind.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bundleWorker,
  ensureRuntime,
  etcdEndpoint,
  gatewayRange,
  INSTALL_TIMEOUT_MS,
  project,
  startWorkerd,
  uniquePrefix,
  workDir,
  workerdConfig,
  writeText,
  type WorkerdServer,
} from "../support/runtimes.js";

const example = join(import.meta.dirname, "../../examples/workers");
const compatibilityDate = /compatibility_date\s*=\s*"([^"]+)"/.exec(
  readFileSync(join(example, "wrangler.toml"), "utf8"),
)![1]!;

describe("examples/workers in workerd", () => {
  let server: WorkerdServer | undefined;

  beforeAll(async () => {
    const workerd = await ensureRuntime("workerd");
    const dir = workDir("workers-example");
    writeText(join(project(), "workers-example.mjs"), readFileSync(join(example, "src/index.js"), "utf8"));
    await bundleWorker(dir, "workers-example.mjs");
    const config = join(dir, "config.capnp");
    writeText(config, workerdConfig(etcdEndpoint(), compatibilityDate));
    // The example answers 400 to a request without ?order=: that is how we know it is serving.
    server = await startWorkerd(workerd, config, dir, (status) => status === 400);
  }, INSTALL_TIMEOUT_MS);

  afterAll(async () => {
    await server?.stop();
  });

  it("serialises order updates under the lock and fences each write", async () => {
    const order = uniquePrefix("workers-example").replace(/\W/g, "-");
    /** Asks the Worker to set the order's status. */
    const update = async (status: string) => {
      const response = await fetch(`${server!.url}/?order=${order}&status=${status}`, {
        signal: AbortSignal.timeout(30_000),
      });
      return { status: response.status, body: (await response.json()) as { ok: boolean; fencingToken: number } };
    };
    const [first, second] = await Promise.all([update("paid"), update("shipped")]);
    expect(first, server!.output()).toMatchObject({ status: 200, body: { ok: true } });
    expect(second, server!.output()).toMatchObject({ status: 200, body: { ok: true } });
    expect(first.body.fencingToken).not.toBe(second.body.fencingToken);
    const last = first.body.fencingToken > second.body.fencingToken ? first : second;
    const { kvs: stored } = await gatewayRange(etcdEndpoint(), `orders/${order}/`, { prefix: true });
    const values = Object.fromEntries(stored.map((kv) => [kv.key, kv.value]));
    expect(values[`orders/${order}/token`]).toBe(String(last.body.fencingToken));
    expect(values[`orders/${order}/status`]).toBe(last === first ? "paid" : "shipped");
    expect(Object.keys(values).filter((key) => key.startsWith(`orders/${order}/lock/`))).toEqual([]);
    expect(server!.output()).not.toMatch(/uncaught|unhandled|hanging promise|exception/i);
  });
});
