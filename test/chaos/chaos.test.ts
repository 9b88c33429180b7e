// The short chaos run inside `npm test`: the same runner as `npm run chaos`, 75 s of faults, and every check
// must pass. A seed is drawn per run and printed; `npm run chaos -- --duration 75 --seed N --etcd V` replays its
// schedule (the timing of a loaded machine never replays exactly). The cluster's etcd version takes turns, one
// per day (ETCD_EDGE_CHAOS_ETCD picks one).
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { afterAll, describe, expect, it } from "vitest";
import { DIST_ENTRY, distIsCurrent } from "../support/build.ts";
import { ETCD_VERSIONS } from "../support/etcd-versions.ts";
import type { CheckResult } from "./checks.ts";
import type { Figures } from "./report.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const DURATION_S = 75;
const DAY_MS = 86_400_000;
const ETCD = process.env.ETCD_EDGE_CHAOS_ETCD ?? ETCD_VERSIONS[Math.floor(Date.now() / DAY_MS) % ETCD_VERSIONS.length]!;
// Inside the repository, so a bundle made here resolves its dependencies from node_modules.
mkdirSync(join(ROOT, ".cache"), { recursive: true });
const temp = mkdtempSync(join(ROOT, ".cache", "chaos-test-"));

afterAll(() => rmSync(temp, { recursive: true, force: true }));

/**
 * The built package: dist/ when it is newer than every source (as in `npm test`, which builds first), else
 * a bundle of the sources made here, so a stale dist/ never gets tested by mistake.
 */
async function builtSdk(): Promise<string> {
  if (distIsCurrent()) return dirname(DIST_ENTRY);
  const out = join(temp, "sdk");
  mkdirSync(out, { recursive: true });
  await build({
    entryPoints: { index: join(ROOT, "src/index.ts"), node: join(ROOT, "src/node/index.ts") },
    outdir: out,
    bundle: true,
    format: "esm",
    platform: "node",
    external: ["undici", "base64-js", "zod"],
    logLevel: "silent",
  });
  return out;
}

function run(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["test/chaos/run.ts", ...args], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.on("exit", (code) => resolve({ code, output }));
  });
}

describe("chaos (short run)", () => {
  it(`${DURATION_S} s of faults on a 3-member etcd ${ETCD} cluster: every check passes`, {
    timeout: 360_000,
  }, async () => {
    const sdk = await builtSdk();
    const seed = Math.floor(Math.random() * 2 ** 31);
    const json = join(temp, "report.json");
    const { code, output } = await run([
      "--duration",
      String(DURATION_S),
      "--seed",
      String(seed),
      "--sdk",
      sdk,
      "--json",
      json,
      "--etcd",
      ETCD,
      // The fence control runs on its own in the stores project (test/stores); `npm run chaos` runs it under faults.
      "--no-fence",
    ]);
    if (!existsSync(json)) throw new Error(`the chaos run did not complete (exit ${code}):\n${output.slice(-4_000)}`);
    const report = JSON.parse(readFileSync(json, "utf8")) as { checks: CheckResult[]; figures: Figures };
    const failed = report.checks
      .filter((c) => !c.ok)
      .map((c) => `${c.name}: ${c.summary}\n  ${c.details.join("\n  ")}`);
    expect(failed, `seed ${seed}, etcd ${ETCD}; report:\n${output.slice(output.lastIndexOf("\nchaos:"))}`).toEqual([]);
    expect(code).toBe(0);
    // The pair holder's joins and releases went to etcd together, under the same faults and checks.
    expect(report.figures.recipes["name-pair"]?.batched).toBeGreaterThan(0);
  });
});
