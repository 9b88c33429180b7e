// `node bench/ab.mjs <dist of B> [--rounds N] [--cycles N]`: two builds of etcd-edge side by side against one
// real etcd, rounds interleaved: A is this repository's dist/ (`npm run build`), B another build's dist/ (build
// the variant with `npx tsup --out-dir <dir>` from its source). It runs the paths a micro-optimisation of the
// lock cycle can change: a session's lock+unlock on one mutex, and a warm `withLock` (a mutex per call),
// each with the global fetch and with etcd-edge/node. It reports B ÷ A for throughput and for the client's
// CPU per cycle: a change is worth its code when B differs from A by 5% or more on one of them.
//
// `--hot S` runs instead a hot name for S seconds per round (4 sessions of one client, §4's loop): a change
// whose cost comes every few seconds (a watch stream's renewal) shows only in a run that long, in the tail of
// the handoff latency. It reports B ÷ A for handoffs/s, the p99 and p99.9 handoff latency and the longest.
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { openBackend } from "../examples/demo/backend.mjs";
import { flagValue } from "./lib/args.mjs";
import { interleaved, numbersOf } from "./lib/rounds.mjs";
import { hotNameEdge } from "./lib/hot-name.mjs";
import { fmt, pairedRatio, quantile, ratioText, summarize, withSpread } from "./lib/stats.mjs";
import { printTable } from "./lib/table.mjs";

const args = process.argv.slice(2);
const variantDir = args.find((arg, i) => !arg.startsWith("--") && !args[i - 1]?.startsWith("--"));
if (variantDir === undefined) {
  console.error("usage: node bench/ab.mjs <dist directory of build B> [--rounds 15] [--cycles 200]");
  process.exit(2);
}
const rounds = Number(flagValue("rounds", 15));
const cycles = Number(flagValue("cycles", 200));
const hotSeconds = flagValue("hot", undefined);

const builds = {
  A: { sdk: await import("etcd-edge"), node: await import("etcd-edge/node") },
  B: {
    sdk: await import(pathToFileURL(resolve(variantDir, "index.js")).href),
    node: await import(pathToFileURL(resolve(variantDir, "node.js")).href),
  },
};

const backend = await openBackend();
if (backend.fetch) {
  console.error("the A/B bench needs a real etcd: set ETCD_ENDPOINTS or put etcd on PATH");
  process.exit(1);
}
const endpoint = backend.endpoints[0];
const run = `ab/${Date.now().toString(36)}`;
const shape = hotSeconds === undefined ? `${rounds} rounds × ${cycles} cycles` : `${rounds} rounds of ${hotSeconds} s`;
console.log(`A/B against ${backend.description}: A = dist/, B = ${variantDir}; ${shape}`);

if (hotSeconds !== undefined) {
  try {
    await hotAB(Number(hotSeconds));
  } finally {
    await backend.close();
  }
  process.exit(0);
}

const cleanup = [];
const contenders = [];
try {
  for (const [build, { sdk, node }] of Object.entries(builds)) {
    for (const kind of ["global", "node"]) {
      const pool = kind === "node" ? node.createNodeFetch() : undefined;
      if (pool) cleanup.push(() => pool.close?.());
      const etcd = new sdk.Etcd({ endpoints: [endpoint], ...(pool ? { fetch: pool } : {}) });
      cleanup.push(() => etcd.close());
      const session = await etcd.session({ ttl: 60 });
      cleanup.push(() => session.close({ timeout: 3_000 }));
      const mutex = session.mutex(`${run}/session-${build}-${kind}`);
      contenders.push({ path: "session lock+unlock", kind, build, cycle: async () => (await mutex.lock()).unlock() });
      const name = `${run}/withLock-${build}-${kind}`;
      contenders.push({ path: "warm withLock", kind, build, cycle: () => etcd.withLock(name, () => {}) });
      // Four callers of one client on one name: each cycle is four contended withLock calls.
      const hot = `${run}/hot-${build}-${kind}`;
      const four = () => Promise.all([0, 1, 2, 3].map(() => etcd.withLock(hot, () => {})));
      contenders.push({ path: "4 contended withLock", kind, build, cycle: four });
    }
  }
  for (const c of contenders) c.name = `${c.path} ${c.kind} ${c.build}`;
  const results = await interleaved(contenders, rounds, async (c) => {
    const cpu = process.cpuUsage();
    const start = performance.now();
    for (let i = 0; i < cycles; i++) await c.cycle();
    const wall = performance.now() - start;
    const used = process.cpuUsage(cpu);
    return { micros: (wall / cycles) * 1000, cpu: (used.user + used.system) / cycles };
  });
  const rows = [];
  for (const c of contenders.filter((c) => c.build === "A")) {
    const a = results.get(c.name);
    const b = results.get(c.name.replace(/ A$/, " B"));
    const aMicros = numbersOf(a, (r) => r.micros).values;
    const bMicros = numbersOf(b, (r) => r.micros).values;
    const aCpu = numbersOf(a, (r) => r.cpu).values;
    const bCpu = numbersOf(b, (r) => r.cpu).values;
    rows.push([
      `${c.path}, ${c.kind} fetch`,
      withSpread(summarize(aMicros)),
      withSpread(summarize(bMicros)),
      // Throughput B ÷ A is A's time ÷ B's.
      ratioText(pairedRatio(aMicros, bMicros)),
      `${fmt(summarize(aCpu).median)} / ${fmt(summarize(bCpu).median)}`,
      ratioText(pairedRatio(bCpu, aCpu)),
    ]);
  }
  printTable(["path", "A µs/cycle", "B µs/cycle", "throughput B ÷ A", "client CPU µs A / B", "CPU B ÷ A"], rows);
} finally {
  for (const step of cleanup.reverse()) {
    await Promise.resolve()
      .then(step)
      .catch(() => {});
  }
  await backend.close();
}
process.exit(0);

/** Each build on one hot name per fetch, rounds interleaved; B ÷ A of the rate and of the latency's tail. */
async function hotAB(seconds) {
  const contenders = [];
  for (const build of Object.keys(builds)) {
    for (const kind of ["global", "node"]) contenders.push({ name: `${kind} ${build}`, kind, build });
  }
  const results = await interleaved(contenders, rounds, async (c, round) => {
    const name = `${run}/hot-${c.build}-${c.kind}/${round + 1}`;
    const spec = { endpoint, kind: c.kind, workers: 4, seconds, name, timeout: 10_000, holdMs: 1 };
    const { rate, log } = await hotNameEdge({ ...spec, sdk: builds[c.build].sdk });
    const latencies = log.latencies;
    return {
      rate,
      p99: quantile(latencies, 0.99),
      p999: quantile(latencies, 0.999),
      max: latencies.length ? Math.max(...latencies) : Number.NaN,
    };
  });
  const rows = [];
  for (const kind of ["global", "node"]) {
    const of = (build, pick) => numbersOf(results.get(`${kind} ${build}`), pick).values;
    const cells = [`${kind} fetch`];
    for (const field of ["rate", "p99", "p999", "max"]) {
      const a = of("A", (r) => r[field]);
      const b = of("B", (r) => r[field]);
      cells.push(`${fmt(summarize(a).median, 1)} / ${fmt(summarize(b).median, 1)}`, ratioText(pairedRatio(b, a)));
    }
    rows.push(cells);
  }
  console.log(`hot name, 4 sessions, ${seconds} s per round: medians A / B, then B ÷ A paired`);
  printTable(["fetch", "handoffs/s", "B ÷ A", "p99 ms", "B ÷ A", "p99.9 ms", "B ÷ A", "max ms", "B ÷ A"], rows);
}
