// Bundles each package entry as a user's bundler would (minified, with its dependencies, peers left out)
// and fails when one outgrows its budget in size-budget.json.
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

const budgets = JSON.parse(readFileSync(new URL("../size-budget.json", import.meta.url), "utf8"));
const entries = {
  "etcd-edge": { file: "dist/index.js", platform: "neutral" },
  "etcd-edge/testing": { file: "dist/testing.js", platform: "neutral" },
  "etcd-edge/node": { file: "dist/node.js", platform: "node" },
};

let failed = false;
for (const [name, { file, platform }] of Object.entries(entries)) {
  const result = await build({
    entryPoints: [file],
    bundle: true,
    minify: true,
    format: "esm",
    platform,
    mainFields: ["module", "main"],
    external: ["msw", "undici"],
    write: false,
    logLevel: "silent",
  });
  const bytes = result.outputFiles[0].contents;
  const gzipped = gzipSync(bytes, { level: 9 }).length;
  const budget = budgets[name];
  const verdict = gzipped <= budget ? "ok" : "OVER BUDGET";
  failed ||= gzipped > budget;
  console.log(`${name.padEnd(18)} ${String(gzipped).padStart(6)} B gzipped (${bytes.length} B minified), budget ${budget} B: ${verdict}`);
}
process.exitCode = failed ? 1 : 0;
