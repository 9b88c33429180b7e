// `node bench/ab.mjs <dist of B> [--rounds N] [--cycles N]`: two builds of etcd-edge side by side against one
// real etcd, rounds interleaved: A is this repository's dist/ (`npm run build`), B another build's dist/ (build
// the variant with `npx tsup --out-dir <dir>` from its source). It runs the paths a micro-optimisation of the
// lock cycle can change: a session's lock+unlock on one mutex, and a warm `withLock` (a mutex per call),
// each with the global fetch and with etcd-edge/node. It reports B ÷ A for throughput and for the client's
// CPU per cycle: a change is worth its code when B differs from A by 5% or more on one of them.
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { openBackend } from "../examples/demo/backend.mjs";
import { flagValue } from "./lib/args.mjs";
import { interleaved, numbersOf } from "./lib/rounds.mjs";
import { fmt, pairedRatio, ratioText, summarize, withSpread } from "./lib/stats.mjs";
import { printTable } from "./lib/table.mjs";

const args = process.argv.slice(2);
const variantDir = args.find((arg, i) => !arg.startsWith("--") && !args[i - 1]?.startsWith("--"));
if (variantDir === undefined) {
  console.error("usage: node bench/ab.mjs <dist directory of build B> [--rounds 15] [--cycles 200]");
  process.exit(2);
}
const rounds = Number(flagValue("rounds", 15));
const cycles = Number(flagValue("cycles", 200));

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
console.log(`A/B against ${backend.description}: A = dist/, B = ${variantDir}; ${rounds} rounds × ${cycles} cycles`);

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
