// Side-by-side measurements against one real etcd, reported as ratios:
//   1. an uncontended lock+unlock cycle of this SDK versus the two raw gateway requests it stands for,
//      both on one keep-alive connection (target: within 15%);
//   2. lock throughput of this SDK versus the gRPC client `etcd3` (grant + lock + release per cycle).
import { Etcd3 } from "etcd3";
import { Etcd } from "etcd-edge";
import { createNodeFetch } from "etcd-edge/node";
import { openBackend } from "../examples/demo/backend.mjs";
import { coldImportMs, cycleCpu } from "./client-cpu.mjs";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const CYCLES = Number(process.env.BENCH_CYCLES ?? 300);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const WORKERS = Number(process.env.BENCH_WORKERS ?? 8);

const backend = await openBackend();
if (backend.fetch) {
  console.error("the bench needs a real etcd: set ETCD_ENDPOINTS or put etcd on PATH");
  process.exit(1);
}
const [endpoint] = backend.endpoints;
console.log(`etcd-edge bench against ${backend.description}`);
console.log(`node ${process.version}; ${ROUNDS} rounds × ${CYCLES} cycles; throughput: ${WORKERS} workers × ${SECONDS} s\n`);

try {
  const cpu = await cycleCpu();
  console.log("0. the client alone (a stub fetch that answers instantly)");
  console.log(`   cold import of etcd-edge: ${coldImportMs().toFixed(1)} ms (median of 7 fresh processes)`);
  console.log(
    `   client CPU per lock+unlock cycle: ${cpu.cycle.toFixed(1)} µs; validating the lock response: ` +
      `${cpu.validation.toFixed(1)} µs (${((cpu.validation / cpu.cycle) * 100).toFixed(0)}% of the cycle)\n`,
  );

  console.log("1. uncontended lock+unlock cycle vs two raw gateway requests (median per cycle)");
  for (const [label, fetch] of [["global fetch", globalThis.fetch], ["etcd-edge/node", createNodeFetch({ connections: 1 })]]) {
    const { raw, sdk } = await cycleCost(fetch);
    console.log(`   ${label.padEnd(15)} raw ${ms(raw)}  sdk ${ms(sdk)}  ratio ${(sdk / raw).toFixed(3)} (target ≤ 1.15)`);
    await fetch.close?.();
  }

  console.log(`\n2. lock throughput, ${WORKERS} workers each on its own lock (a new lease per cycle, as etcd3 does)`);
  const etcd3 = new Etcd3({ hosts: endpoint });
  const grpc = await throughput(async (name) => etcd3.lock(name).ttl(10).do(async () => {}));
  etcd3.close();
  console.log(`   etcd3 (gRPC)                      ${grpc.toFixed(0).padStart(6)} cycles/s`);
  for (const [label, fetch] of [["global fetch", undefined], ["etcd-edge/node", createNodeFetch()]]) {
    const etcd = new Etcd({ endpoints: [endpoint], fetch });
    const rate = await throughput((name) => etcd.withLock(name, async () => {}, { ttl: 10 }));
    console.log(`   etcd-edge withLock, ${label.padEnd(14)} ${rate.toFixed(0).padStart(6)} cycles/s  ratio ${(rate / grpc).toFixed(2)} × etcd3`);
    await fetch?.close();
  }
  for (const [label, fetch] of [["global fetch", undefined], ["etcd-edge/node", createNodeFetch()]]) {
    const etcd = new Etcd({ endpoints: [endpoint], fetch });
    const sessions = new Map();
    const rate = await throughput(async (name) => {
      if (!sessions.has(name)) sessions.set(name, await etcd.session({ ttl: 10 }));
      const lock = await sessions.get(name).mutex(name).lock();
      await lock.unlock();
    });
    await Promise.all([...sessions.values()].map((s) => s.close()));
    console.log(`   etcd-edge session reuse, ${label.padEnd(9)} ${rate.toFixed(0).padStart(6)} cycles/s  ratio ${(rate / grpc).toFixed(2)} × etcd3`);
    await fetch?.close();
  }
} finally {
  await backend.close();
}

/** Alternating rounds of raw request pairs and SDK cycles over the same fetch, so drift hits both alike. */
async function cycleCost(fetch) {
  const etcd = new Etcd({ endpoints: [endpoint], fetch });
  const session = await etcd.session({ ttl: 30 });
  const mutex = session.mutex(`bench/cycle/${Date.now()}`);
  // The same two requests the SDK sends: the enqueue transaction and the guarded delete.
  const lock = await mutex.lock();
  const requests = capture(etcd, async () => {
    await lock.unlock();
    await (await mutex.lock()).unlock();
  });
  const bodies = (await requests).slice(-2);
  const post = (body) =>
    fetch(`${endpoint}/v3/kv/txn`, { method: "POST", headers: { "content-type": "application/json" }, body }).then((r) => r.text());
  const rawCycle = async () => {
    await post(bodies[0]);
    await post(bodies[1]);
  };
  const sdkCycle = async () => (await mutex.lock()).unlock();
  const raw = [];
  const sdk = [];
  for (let round = 0; round < ROUNDS + 1; round++) {
    const r = await timePerCycle(rawCycle);
    const s = await timePerCycle(sdkCycle);
    if (round > 0) raw.push(r), sdk.push(s); // round 0 warms up
  }
  await session.close();
  return { raw: median(raw), sdk: median(sdk) };
}

/** Records the JSON bodies the client sends to /v3/kv/txn while `work` runs. */
async function capture(etcd, work) {
  const bodies = [];
  const original = etcd.transport.config.fetch;
  const spy = new Etcd({
    endpoints: [endpoint],
    fetch: (url, init) => {
      if (url.endsWith("/v3/kv/txn")) bodies.push(init.body);
      return (original ?? globalThis.fetch)(url, init);
    },
  });
  const session = await spy.session({ ttl: 30 });
  const mutex = session.mutex(`bench/capture/${Date.now()}`);
  const lock = await mutex.lock();
  await lock.unlock();
  await work();
  await session.close();
  return bodies.slice(0, 2);
}

async function timePerCycle(cycle) {
  const start = performance.now();
  for (let i = 0; i < CYCLES; i++) await cycle();
  return (performance.now() - start) / CYCLES;
}

async function throughput(cycle) {
  let done = 0;
  const deadline = performance.now() + SECONDS * 1000;
  const run = `bench/tp/${Date.now()}/${Math.random().toString(36).slice(2)}`;
  await Promise.all(
    Array.from({ length: WORKERS }, async (_, worker) => {
      while (performance.now() < deadline) {
        await cycle(`${run}/${worker}`);
        done++;
      }
    }),
  );
  return done / SECONDS;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

function ms(value) {
  return `${value.toFixed(3)} ms`;
}
