// Where a fresh process's first withLock spends its time, by hand (not part of `npm run bench`):
//   npm run --silent build && node bench/cold-profile.mjs [--runs 5] [--top 20] [--prime] [--with-import]
//                                                        [--fetch stub,global,node]
// Against a local etcd (started here unless ETCD_ENDPOINTS is set) with no added delay, or a stub fetch that
// answers at once (no network, no runtime fetch: the client's own work alone). Fresh processes run their
// first withLock under `node --cpu-prof`; the samples taken during that call (`--with-import`: from the
// process's start) are summed by function, mapped through dist's source maps to the SDK's own sources or the
// modules bundled into it (zod), or left to the runtime (undici, Node, V8). Printed per fetch: first ÷ warm
// call in the same process (wall and CPU), for withLock and for the same three raw requests; self time by
// owner and by function; and the SDK functions whose calls the samples fall under (inclusive). `--prime`
// sends one request through the fetch first, so the runtime's own first-request setup is out of the window.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { SourceMap } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { openBackend } from "../examples/demo/backend.mjs";
import { flagValue } from "./lib/args.mjs";
import { coldLock } from "./lib/cold-lock.mjs";
import { fmt, median } from "./lib/stats.mjs";
import { printTable } from "./lib/table.mjs";

const args = process.argv.slice(2);
const runs = Number(flagValue("runs", 5));
const top = Number(flagValue("top", 20));
const kinds = flagValue("fetch", "stub,global,node").split(",");
const prime = args.includes("--prime");
const withImport = args.includes("--with-import");
const LABEL = { stub: "stub fetch (no network)", global: "global fetch", node: "etcd-edge/node" };
const dist = fileURLToPath(new URL("../dist/", import.meta.url));
/** dist file → its source map (undefined: none). */
const maps = new Map();

async function profileKind(kind) {
  const calls = { edge: [], raw: [] };
  // Per side: self time by function and by owner; for etcd-edge, time under each SDK function too.
  const self = { edge: new Map(), raw: new Map() };
  const owners = { edge: new Map(), raw: new Map() };
  const inclusive = new Map();
  const windowUs = { edge: 0, raw: 0 };
  for (let run = 0; run < runs; run++) {
    for (const who of ["edge", "raw"]) {
      const name = `bench/profile/${Date.now().toString(36)}/${who}-${kind}-${run}`;
      const dir = mkdtempSync(join(tmpdir(), "etcd-edge-cold-profile-"));
      try {
        const nodeArgs = ["--cpu-prof", "--cpu-prof-interval", "100", "--cpu-prof-dir", dir];
        const result = await coldLock({ who, fetch: kind, endpoint, name, warm: 20, prime }, { nodeArgs });
        calls[who].push(result);
        const file = join(
          dir,
          readdirSync(dir).find((f) => f.endsWith(".cpuprofile")),
        );
        const profile = JSON.parse(readFileSync(file, "utf8"));
        const window = [withImport ? profile.startTime : result.callUs[0], result.callUs[1]];
        windowUs[who] += window[1] - window[0];
        for (const { leaf, sdk, us } of samples(profile, window)) {
          add(self[who], leaf.key, us, leaf);
          add(owners[who], leaf.owner, us);
          if (who === "edge") for (const item of sdk) add(inclusive, item.key, us, item);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }
  const perRun = (us) => fmt((us ?? 0) / runs / 1000, 2);
  const share = (us) => `${fmt((100 * us) / windowUs.edge, 1)}%`;
  const ratio = (list, a, b) => `${fmt(median(list.map((r) => r[a] / r[b])), 1)}×`;
  const ms = (list, key) => fmt(median(list.map((r) => r[key])), 2);
  console.log(`\n${LABEL[kind]}: medians of ${runs} fresh processes`);
  printTable(
    ["", "first call ms", "first CPU ms", "warm ms", "warm CPU ms", "first ÷ warm", "first CPU ÷ warm CPU"],
    ["edge", "raw"].map((who) => [
      who === "edge" ? "withLock" : "raw grant + lock + release",
      ms(calls[who], "callMs"),
      ms(calls[who], "callCpuMs"),
      ms(calls[who], "warmMs"),
      ms(calls[who], "warmCpuMs"),
      ratio(calls[who], "callMs", "warmMs"),
      ratio(calls[who], "callCpuMs", "warmCpuMs"),
    ]),
  );
  console.log(
    `   profiled per run: first withLock ${perRun(windowUs.edge)} ms, raw ${perRun(windowUs.raw)} ms; ` +
      "self time by owner of the code on CPU (share: of withLock's):",
  );
  const rawUs = (map, key) => map.get(key)?.us ?? map.get(key) ?? 0;
  printTable(
    ["owner", "withLock ms per run", "raw ms per run", "withLock − raw", "share"],
    sorted(owners.edge).map(([owner, us]) => {
      const raw = rawUs(owners.raw, owner);
      return [owner, perRun(us), perRun(raw), perRun(us - raw), share(us)];
    }),
  );
  console.log("   top functions by self time in withLock's first call, beside the raw side's:");
  printTable(
    ["owner", "function", "source", "withLock ms per run", "raw", "share"],
    sorted(self.edge)
      .slice(0, top)
      .map(([key, { us, item }]) => [
        item.owner,
        item.fn,
        item.where,
        perRun(us),
        perRun(rawUs(self.raw, key)),
        share(us),
      ]),
    { align: "lllrrr" },
  );
  console.log("   SDK functions the samples fall under (inclusive: their callees, runtime work they started too):");
  printTable(
    ["function", "source", "ms per run", "share"],
    sorted(inclusive)
      .slice(0, top)
      .map(([, { us, item }]) => [item.fn, item.where, perRun(us), share(us)]),
    { align: "llrr" },
  );
}

function add(map, key, us, item) {
  const seen = map.get(key);
  if (item === undefined) map.set(key, (seen ?? 0) + us);
  else map.set(key, { item, us: (seen?.us ?? 0) + us });
}

const sorted = (map) => [...map].sort((a, b) => (b[1].us ?? b[1]) - (a[1].us ?? a[1]));

/**
 * Each sample within `[from, to]` (monotonic µs, the profile's clock) with the time until the next: its leaf
 * frame, and the distinct SDK frames on its stack.
 */
function* samples(profile, [from, to]) {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
  const described = new Map();
  const frame = (id) => {
    if (!described.has(id)) described.set(id, describe(nodes.get(id).callFrame));
    return described.get(id);
  };
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i];
    if (t < from || t > to) continue;
    const us = profile.timeDeltas[i + 1] ?? 0;
    const sdk = new Map();
    for (let id = profile.samples[i]; id !== undefined; id = parent.get(id)) {
      const item = frame(id);
      if (item.owner.startsWith("SDK")) sdk.set(item.key, item);
    }
    yield { leaf: frame(profile.samples[i]), sdk: [...sdk.values()], us };
  }
}

/** Who owns a frame: the SDK (its own source, or zod bundled into it), undici, Node, V8. */
function describe({ functionName, url, lineNumber, columnNumber }) {
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
  const owner = /undici/.test(path)
    ? "runtime: undici"
    : path.startsWith("node:")
      ? "runtime: Node"
      : path.includes("/bench/")
        ? "bench harness"
        : "other";
  const short = path.replace(/^.*node_modules\//, "node_modules/").replace(/^.*\/bench\//, "bench/");
  const where = `${short}:${lineNumber + 1}`;
  return { key: `${where} ${fn}`, owner, fn, where };
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

// Last, once every declaration above is initialised.
const backend = kinds.some((k) => k !== "stub") ? await openBackend() : undefined;
if (backend?.fetch) throw new Error("needs a real etcd: set ETCD_ENDPOINTS or put etcd on PATH");
const endpoint = backend?.endpoints[0] ?? "http://stub.invalid:2379";
try {
  console.log(
    `first withLock in a fresh process, ${runs} runs per fetch, ${prime ? "after" : "with"} the runtime's ` +
      `first request; window: ${withImport ? "process start to the end of the first withLock" : "the first withLock"}`,
  );
  for (const kind of kinds) await profileKind(kind);
} finally {
  await backend?.close();
}
