// Bundles each package entry as a user's bundler would (minified, with its dependencies, peers left out)
// and fails when one outgrows its budget in size-budget.json. `npm run bench` imports bundleSizes() to
// print the same table.
import { readFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

const root = new URL("../", import.meta.url);
const entries = {
  "etcd-edge": { file: "dist/index.js", platform: "neutral" },
  "etcd-edge/testing": { file: "dist/testing.js", platform: "neutral" },
  "etcd-edge/testing/msw": { file: "dist/testing-msw.js", platform: "neutral" },
  "etcd-edge/testing/server": { file: "dist/testing-server.js", platform: "node" },
  "etcd-edge/node": { file: "dist/node.js", platform: "node" },
  "etcd-edge/otel": { file: "dist/otel.js", platform: "neutral" },
  "etcd-edge/fence": { file: "dist/fence.js", platform: "neutral" },
  "etcd-edge/operate": { file: "dist/operate.js", platform: "neutral" },
};

/** One row per entry: gzipped and minified bytes, its budget, and whether it fits. */
export async function bundleSizes() {
  const budgets = JSON.parse(readFileSync(new URL("size-budget.json", root), "utf8"));
  const rows = [];
  for (const [name, { file, platform }] of Object.entries(entries)) {
    const result = await build({
      entryPoints: [fileURLToPath(new URL(file, root))],
      bundle: true,
      minify: true,
      format: "esm",
      platform,
      mainFields: ["module", "main"],
      external: ["msw", "undici", "@opentelemetry/api"],
      write: false,
      logLevel: "silent",
    });
    const bytes = result.outputFiles[0].contents;
    const gzipped = gzipSync(bytes, { level: 9 }).length;
    rows.push({ name, gzipped, minified: bytes.length, budget: budgets[name], ok: gzipped <= budgets[name] });
  }
  return rows;
}

export function sizeLine({ name, gzipped, minified, budget, ok }) {
  return (
    `${name.padEnd(18)} ${String(gzipped).padStart(6)} B gzipped (${minified} B minified), ` +
    `budget ${budget} B: ${ok ? "ok" : "OVER BUDGET"}`
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const rows = await bundleSizes();
  for (const row of rows) console.log(sizeLine(row));
  process.exitCode = rows.every((row) => row.ok) ? 0 : 1;
}
