// Where a fresh process's first withLock spends its CPU, by hand (not part of `npm run bench`):
//   npm run --silent build && node bench/cold-profile.mjs [--runs 5] [--top 25] [--prime] [--with-import]
// Against a local etcd (started here unless ETCD_ENDPOINTS is set), with no added delay, each of Node's
// global fetch and etcd-edge/node: fresh processes run their first withLock under `node --cpu-prof`, and the
// samples taken during that call (import excluded) are summed by function, mapped through dist's source maps
// to the SDK's own sources or the modules bundled into it (zod), or left to the runtime (undici, Node, V8).
// `--prime` sends one request through the fetch before the first withLock, so the runtime's own
// first-request setup is out of the window; `--with-import` widens the window to the whole process up to the
// end of the first withLock (module evaluation: schemas built at import). Also prints first ÷ warm withLock
// in the same processes, and the same for the three raw requests.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { SourceMap } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { openBackend } from "../examples/demo/backend.mjs";
import { coldLock } from "./lib/cold-lock.mjs";
import { FETCH_KINDS, FETCH_LABEL } from "./lib/fetches.mjs";
import { fmt, median } from "./lib/stats.mjs";
import { printTable } from "./lib/table.mjs";

const args = process.argv.slice(2);
const flag = (name, def) => {
  const i = args.indexOf(`--${name}`);
  return i < 0 ? def : Number(args[i + 1]);
};
const runs = flag("runs", 5);
const top = flag("top", 25);
const prime = args.includes("--prime");
const withImport = args.includes("--with-import");
/** dist file → its source map (undefined: none). */
const maps = new Map();

const backend = await openBackend();
if (backend.fetch) throw new Error("needs a real etcd: set ETCD_ENDPOINTS or put etcd on PATH");
const endpoint = backend.endpoints[0];
const dist = fileURLToPath(new URL("../dist/", import.meta.url));
try {
  console.log(
    `first withLock in a fresh process, ${runs} runs per fetch, ${prime ? "after" : "with"} the first request`,
  );
  for (const kind of FETCH_KINDS) {
    const ratios = { edge: [], raw: [] };
    const byItem = new Map();
    const byOwner = new Map();
    let windowUs = 0;
    for (let run = 0; run < runs; run++) {
      for (const who of ["edge", "raw"]) {
        const name = `bench/profile/${Date.now().toString(36)}/${who}-${kind}-${run}`;
        const dir = mkdtempSync(join(tmpdir(), "etcd-edge-cold-profile-"));
        try {
          const nodeArgs = who === "edge" ? ["--cpu-prof", "--cpu-prof-interval", "100", "--cpu-prof-dir", dir] : [];
          const result = await coldLock({ who, fetch: kind, endpoint, name, warm: 9, prime }, { nodeArgs });
          ratios[who].push(result.callMs / result.warmMs);
          if (who !== "edge") continue;
          const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
          const profile = JSON.parse(readFileSync(join(dir, file), "utf8"));
          const window = [withImport ? profile.startTime : result.callUs[0], result.callUs[1]];
          windowUs += window[1] - window[0];
          for (const [item, us] of selfTimes(profile, window, dist)) {
            byItem.set(item.key, { ...item, us: (byItem.get(item.key)?.us ?? 0) + us });
            byOwner.set(item.owner, (byOwner.get(item.owner) ?? 0) + us);
          }
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      }
    }
    const share = (us) => `${fmt((100 * us) / windowUs, 1)}%`;
    console.log(
      `\n${FETCH_LABEL[kind]}: first ÷ median warm call (same process), withLock ` +
        `${fmt(median(ratios.edge), 2)}× [${ratios.edge.map((r) => fmt(r, 1)).join(" ")}], ` +
        `raw requests ${fmt(median(ratios.raw), 2)}× [${ratios.raw.map((r) => fmt(r, 1)).join(" ")}]; ` +
        `${withImport ? "start to end of the first withLock" : "first withLock"} ` +
        `${fmt(windowUs / runs / 1000, 1)} ms on average, by owner of the code on CPU:`,
    );
    printTable(
      ["owner", "self ms per run", "share"],
      [...byOwner].sort((a, b) => b[1] - a[1]).map(([owner, us]) => [owner, fmt(us / runs / 1000, 2), share(us)]),
    );
    const rows = [...byItem.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map((item) => [item.owner, item.fn, item.where, fmt(item.us / runs / 1000, 2), share(item.us)]);
    printTable(["owner", "function", "source", "self ms per run", "share"], rows, { align: "lllrr" });
  }
} finally {
  await backend.close();
}

/** Self µs per function among the samples within `[from, to]` (monotonic µs, as the profile's clock). */
function selfTimes(profile, [from, to], dist) {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i];
    const next = profile.timeDeltas[i + 1] ?? 0;
    if (t < from || t > to) continue;
    const id = profile.samples[i];
    self.set(id, (self.get(id) ?? 0) + next);
  }
  const out = new Map();
  for (const [id, us] of self) {
    const item = describe(nodes.get(id).callFrame, dist);
    const seen = out.get(item.key);
    out.set(item.key, seen ? [seen[0], seen[1] + us] : [item, us]);
  }
  return [...out.values()];
}

/** Who owns a frame: the SDK (its own source, or zod bundled into it), undici, Node, V8. */
function describe({ functionName, url, lineNumber, columnNumber }, dist) {
  const fn = functionName || "(anonymous)";
  if (url === "") return { key: fn, owner: fn.startsWith("(") ? "V8" : "V8 (native)", fn, where: "" };
  const path = url.startsWith("file://") ? fileURLToPath(url) : url;
  if (path.startsWith(dist)) {
    const entry = sourceMapOf(path)?.findEntry(lineNumber, columnNumber);
    const source = entry?.originalSource?.replace(/^.*?(node_modules\/|src\/)/, "$1") ?? path.slice(dist.length);
    const line = entry?.originalLine === undefined ? "" : `:${entry.originalLine + 1}`;
    const owner = source.includes("node_modules/zod")
      ? "SDK: bundled zod"
      : source.includes("node_modules/")
        ? "SDK: bundled other"
        : "SDK: own";
    return { key: `${source}${line} ${fn}`, owner, fn, where: `${source}${line}` };
  }
  const owner = /undici/.test(path) ? "runtime: undici" : path.startsWith("node:") ? "runtime: Node" : "other";
  const where = path.replace(/^.*node_modules\//, "node_modules/");
  return { key: `${where}:${lineNumber + 1} ${fn}`, owner, fn, where: `${where}:${lineNumber + 1}` };
}

function sourceMapOf(path) {
  if (!maps.has(path)) {
    try {
      maps.set(path, new SourceMap(JSON.parse(readFileSync(`${path}.map`, "utf8"))));
    } catch {
      maps.set(path, undefined);
    }
  }
  return maps.get(path);
}
