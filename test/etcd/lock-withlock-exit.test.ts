// withLock: value, release, errors, a lease that runs out under fn, and (in child processes) that nothing
// the SDK leaves behind keeps a Node process alive once it returns.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Lock } from "../../src/index.js";
import { rejection, sleep } from "../support/async.js";
import {
  client,
  fencedPut,
  keysUnder,
  leaseAlive,
  recordingFetch,
  sharedEndpoint,
  uniqueName,
} from "../support/etcd.js";

const etcd = client();
const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const fixture = join(here, "fixtures", "withlock-exit.mjs");

describe("withLock in-process", () => {
  it(
    "per-call lease: returns fn's value, runs fn holding the lock, " + "and releases it (lease revoked, no key left)",
    async () => {
      const name = uniqueName();
      let seen: { key: string; revision: number; leaseId: string } | undefined;
      const value = await etcd.withLock(
        name,
        async (lock: Lock) => {
          seen = { key: lock.key, revision: lock.revision, leaseId: lock.leaseId };
          expect(lock.held).toBe(true);
          const info = await etcd.inspectLock(name);
          expect(info.holder?.key).toBe(lock.key);
          expect(await fencedPut(etcd, lock, `${name}-data`)).toBe(true);
          return { answer: 42 };
        },
        { ttl: 10, lease: "per-call" },
      );
      expect(value).toEqual({ answer: 42 });
      expect(seen).toBeDefined();
      expect((await etcd.inspectLock(name)).holder).toBeUndefined();
      expect(await keysUnder(etcd, name)).toEqual([]);
      expect(await leaseAlive(etcd, seen!.leaseId)).toBe(false);
    },
  );

  it("a synchronous fn's value is returned too", async () => {
    expect(await etcd.withLock(uniqueName(), () => "sync", { ttl: 10, keepAlive: "manual" })).toBe("sync");
  });

  it(
    "per-call lease: rethrows fn's error (the same object) " + "after releasing the lock and revoking the lease",
    async () => {
      const name = uniqueName();
      const boom = new Error("boom");
      let leaseId: string | undefined;
      let heldWhenThrown = false;
      await expect(
        etcd.withLock(
          name,
          (lock) => {
            leaseId = lock.leaseId;
            heldWhenThrown = lock.held;
            throw boom;
          },
          { ttl: 10, lease: "per-call" },
        ),
      ).rejects.toBe(boom);
      expect(heldWhenThrown).toBe(true);
      expect((await etcd.inspectLock(name)).holder).toBeUndefined();
      expect(await leaseAlive(etcd, leaseId!)).toBe(false);
    },
  );

  it("serialises concurrent withLock calls on one name", async () => {
    const name = uniqueName();
    let inside = 0;
    let maxInside = 0;
    const order: number[] = [];
    await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        etcd.withLock(
          name,
          async () => {
            inside++;
            maxInside = Math.max(maxInside, inside);
            await sleep(50);
            order.push(i);
            inside--;
          },
          { ttl: 10 },
        ),
      ),
    );
    expect(maxInside).toBe(1);
    expect(order.sort()).toEqual([0, 1, 2, 3, 4]);
  });

  it(
    "per-call lease: a contended withLock that times " + "out throws TIMEOUT and leaves neither key nor lease",
    async () => {
      const name = uniqueName();
      const holder = await etcd.session({ ttl: 10 });
      const lock = await holder.mutex(name).lock();
      // Learn the lease withLock grants from the gateway's answer.
      const granted: string[] = [];
      const spying = client({
        fetch: async (url, init) => {
          const response = await globalThis.fetch(url, init);
          if (url.endsWith("/v3/lease/grant")) granted.push(((await response.clone().json()) as { ID: string }).ID);
          return response;
        },
      });
      let ran = false;
      const error = await rejection(
        spying.withLock(name, () => (ran = true), { ttl: 10, timeout: 400, lease: "per-call" }),
      );
      expect(error.code).toBe("TIMEOUT");
      expect(ran).toBe(false);
      expect(await keysUnder(etcd, name)).toEqual([lock.key]);
      expect(granted).toHaveLength(1);
      expect(await leaseAlive(etcd, granted[0]!)).toBe(false);
      await holder.close();
    },
  );

  it("shared lease (default): a warm call costs two requests, take and release, and leaves no key", async () => {
    const fetch = recordingFetch();
    const warm = client({ fetch });
    const name = uniqueName();
    const first = await warm.withLock(name, (lock) => lock.leaseId, { ttl: 30 });
    expect(fetch.since(0)).toEqual(["/v3/lease/grant", "/v3/kv/txn", "/v3/kv/txn"]);
    const mark = fetch.mark();
    const second = await warm.withLock(
      name,
      async (lock) => {
        expect(await fencedPut(etcd, lock, `${name}-data`)).toBe(true);
        return lock.leaseId;
      },
      { ttl: 30 },
    );
    expect(second).toBe(first);
    expect(fetch.since(mark)).toEqual(["/v3/kv/txn", "/v3/kv/txn"]);
    expect(await keysUnder(etcd, name)).toEqual([]);
    // The lease stays for the next call, holding nothing, until the client is closed.
    expect(await leaseAlive(etcd, first)).toBe(true);
    await warm.close();
    expect(await leaseAlive(etcd, first)).toBe(false);
  });

  it(
    "shared lease: one that ended behind the client's " +
      "back (a frozen process) costs one extra grant, never a wrong lock",
    async () => {
      const fetch = recordingFetch();
      const warm = client({ fetch });
      const name = uniqueName();
      const first = await warm.withLock(name, (lock) => lock.leaseId, { ttl: 30 });
      // The client still trusts its deadline; only the server knows the lease is gone.
      await etcd.lease.revoke(first);
      const mark = fetch.mark();
      const second = await warm.withLock(
        name,
        async (lock) => {
          expect(lock.held).toBe(true);
          return lock.leaseId;
        },
        { ttl: 30 },
      );
      expect(second).not.toBe(first);
      expect(fetch.since(mark)).toEqual(["/v3/kv/txn", "/v3/lease/grant", "/v3/kv/txn", "/v3/kv/txn"]);
      expect(await keysUnder(etcd, name)).toEqual([]);
      await warm.close();
    },
  );

  it("shared lease: a contended call that times out leaves no key, and the lease serves the next call", async () => {
    const name = uniqueName();
    const holder = await etcd.session({ ttl: 10 });
    const lock = await holder.mutex(name).lock();
    const warm = client();
    const error = await rejection(warm.withLock(name, () => "never", { ttl: 30, timeout: 400 }));
    expect(error.code).toBe("TIMEOUT");
    expect(await keysUnder(etcd, name)).toEqual([lock.key]);
    await lock.unlock();
    expect(await warm.withLock(name, () => "next", { ttl: 30 })).toBe("next");
    await holder.close();
    await warm.close();
  });

  it("throws LOCK_LOST when fn outlives a manual ttl-2 lease, even though fn succeeded", async () => {
    const name = uniqueName();
    let leaseId: string | undefined;
    let finished = false;
    const started = performance.now();
    const error = await rejection(
      etcd.withLock(
        name,
        async (lock) => {
          leaseId = lock.leaseId;
          await sleep(4_500);
          finished = true;
          return "too late";
        },
        { ttl: 2, keepAlive: "manual" },
      ),
    );
    expect(finished).toBe(true);
    expect(error.code).toBe("LOCK_LOST");
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(await leaseAlive(etcd, leaseId!)).toBe(false);
    // The lock is free for others.
    const session = await etcd.session({ ttl: 10 });
    const next = await session.mutex(name).tryLock();
    expect(next).toBeDefined();
    await session.close();
  });
});

// Sequential: concurrent child processes on a small machine would blur the exit timing.
describe("withLock leaves the process free to exit", () => {
  let bundleDir: string;
  let bundle: string;

  beforeAll(async () => {
    // Bundle the current src (dist may be stale), as the published build would be.
    bundleDir = mkdtempSync(join(tmpdir(), "etcd-edge-withlock-exit-"));
    bundle = join(bundleDir, "etcd-edge.mjs");
    await build({
      entryPoints: [join(root, "src/index.ts")],
      bundle: true,
      format: "esm",
      platform: "node",
      target: "node22",
      outfile: bundle,
      logLevel: "silent",
    });
  });

  afterAll(() => {
    if (bundleDir) rmSync(bundleDir, { recursive: true, force: true });
  });

  interface Run {
    code: number | null;
    signal: NodeJS.Signals | null;
    stdout: string;
    stderr: string;
    /** ms from the "done" line to the process's exit, or undefined if "done" never came. */
    lingered: number | undefined;
  }

  function runFixture(name: string, scenario: string, holdMs = 0): Promise<Run> {
    return new Promise((resolvePromise) => {
      const child = spawn(process.execPath, [fixture, bundle, sharedEndpoint(), name, scenario, String(holdMs)], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      let doneAt: number | undefined;
      // Bounded: a process that lingers is killed, and the test fails on `lingered`.
      const killer = setTimeout(() => child.kill("SIGKILL"), 20_000);
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        stdout += chunk;
        if (doneAt === undefined && stdout.includes("done")) doneAt = performance.now();
      });
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
      child.once("exit", (code, signal) => {
        clearTimeout(killer);
        const exitedAt = performance.now();
        resolvePromise({
          code,
          signal,
          stdout,
          stderr,
          lingered: doneAt === undefined ? undefined : exitedAt - doneAt,
        });
      });
    });
  }

  it.for([
    ["manual", 0],
    ["manual", 1_000],
    ["auto", 0],
    // Long enough for at least one background renewal (every ttl/3 = 1.7 s) to have run and be rescheduled.
    ["auto", 2_200],
    ["contended-auto", 0],
    ["session-auto", 2_200],
  ] as const)(
    "%s (fn holds %i ms): exits within 1.5 s of printing done, with code 0",
    async ([scenario, holdMs], { expect }) => {
      const name = uniqueName();
      const run = await runFixture(name, scenario, holdMs);
      console.info(
        `withlock-exit ${scenario}/${holdMs}: ` +
          `exited ${run.lingered === undefined ? "?" : Math.round(run.lingered)} ms after done`,
      );
      expect(run.stderr).toBe("");
      expect(run.code).toBe(0);
      expect(run.stdout).toMatch(/^done /);
      expect(run.lingered).toBeDefined();
      expect(run.lingered!).toBeLessThan(1_500);
      if (scenario !== "session-auto") {
        expect(run.stdout.trim()).toMatch(new RegExp(`^done ${name}/[0-9a-f]+_[0-9a-f]{16}@\\d+$`));
        expect((await etcd.inspectLock(name)).holder).toBeUndefined();
      }
    },
  );

  it("the measurement catches a lingering process (control: a ref'd 3 s timer after done)", async ({ expect }) => {
    const control = join(bundleDir, "control.mjs");
    const { writeFileSync } = await import("node:fs");
    writeFileSync(control, 'process.stdout.write("done\\n"); setTimeout(() => {}, 3000);\n');
    const started = performance.now();
    const lingered = await new Promise<number>((resolvePromise) => {
      const child = spawn(process.execPath, [control], { stdio: ["ignore", "pipe", "inherit"] });
      let doneAt = 0;
      child.stdout.on("data", () => (doneAt ||= performance.now()));
      child.once("exit", () => resolvePromise(performance.now() - doneAt));
    });
    expect(lingered).toBeGreaterThan(2_000);
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});
