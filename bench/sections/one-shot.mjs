// §2 One-shot withLock, as serverless handlers use it. Cold: a new client for every call (a new fetch pool
// for etcd-edge/node, a new gRPC channel for etcd3; the global fetch's pool is process-wide, so for it only
// the client is new). Warm: a module-scope client reused across calls, as a warm Lambda keeps it, with
// `lease: "shared"` (keep a lease across calls: lock + release, 2 requests) and `lease: "per-call"` (grant +
// lock + revoke, 3 requests). Requests per call are counted at the fetch, so the table shows which path ran.
import { Etcd } from "etcd-edge";
import { createNodeFetch } from "etcd-edge/node";
import { Etcd3 } from "etcd3";
import { bounded } from "../lib/bounded.mjs";
import { countingFetch, EDGE_LABEL, FETCH_KINDS, FETCH_LABEL, openFetch } from "../lib/fetches.mjs";
import { interleaved, numbersOf } from "../lib/rounds.mjs";
import { fmt, median, pairedRatio, ratioText, summarize, withSpread } from "../lib/stats.mjs";
import { meets } from "../lib/summary.mjs";
import { printTable } from "../lib/table.mjs";

const noop = () => {};
const LEASE_MODES = ["shared", "per-call"];

export async function oneShot({ endpoint, options, summary, run }) {
  console.log(
    `2. one-shot withLock vs etcd3 lock().do() (µs/call; ` +
      `cold ${options.coldCycles}, warm ${options.cycles} calls per round)`,
  );
  const cleanup = [];
  try {
    const cold = await measureCold(endpoint, options, run);
    const warm = await measureWarm(endpoint, options, run, cleanup);
    console.log(
      "   cold: a new client per call (etcd-edge/node: a new pool; " +
        "etcd3: a new channel; the global fetch keeps its process-wide pool)",
    );
    console.log(
      "   warm: one client reused; " +
        'lease: "shared" keeps a lease across calls (target 2 requests), "per-call" grants and revokes one',
    );
    const rows = [];
    for (const [group, results, etcd3Name] of [
      ["cold", cold, "cold-etcd3"],
      ["warm", warm, "warm-etcd3"],
    ]) {
      const etcd3 = numbersOf(results.get(etcd3Name), (r) => r.micros).values;
      for (const [name, result] of results) {
        const { values, error } = numbersOf(result, (r) => r.micros);
        const requests = median(numbersOf(result, (r) => r.requests).values);
        const paths = result.find((r) => r.paths)?.paths ?? "";
        const ratio = pairedRatio(etcd3, values);
        rows.push([
          `${group}: ${label(name)}`,
          withSpread(summarize(values)),
          name.endsWith("etcd3") ? "" : fmt(requests, 2),
          name.endsWith("etcd3") ? "1.00×" : ratioText(ratio),
          paths,
        ]);
        if (error) console.log(`   ${name} failed in some rounds: ${error.code ?? ""} ${error.message}`);
        if (group === "warm" && name.endsWith("-shared")) {
          const kind = name.split("-")[1];
          summary.add(
            2,
            `warm withLock requests, ${FETCH_LABEL[kind]}`,
            fmt(requests, 2),
            "2",
            meets(requests, "<=", 2),
          );
          const target = kind === "node" ? 1.3 : 1.0;
          summary.add(
            2,
            `warm withLock throughput ÷ etcd3 lock().do(), ${FETCH_LABEL[kind]}`,
            `${fmt(ratio.median, 2)}×`,
            `≥ ${target.toFixed(1)}×`,
            meets(ratio.median, ">=", target),
          );
        }
      }
    }
    printTable(["contender", "µs/call [min–max]", "requests/call", "throughput ÷ etcd3", "requests sent"], rows, {
      align: "lrrrl",
    });
  } finally {
    for (const step of cleanup.reverse())
      await Promise.resolve()
        .then(step)
        .catch(() => {});
  }
  console.log("");
}

function label(name) {
  if (name.endsWith("etcd3")) return "etcd3 lock().do()";
  const [, kind, ...mode] = name.split("-");
  return `${EDGE_LABEL[kind]}${mode.length ? `, lease: "${mode.join("-")}"` : ""}`;
}

async function measureCold(endpoint, options, run) {
  const global = countingFetch(undefined);
  // One counter across calls; each call swaps in a new pool behind it.
  let pool;
  const node = countingFetch((url, init) => pool(url, init));
  const contenders = [
    {
      name: "cold-global",
      counter: global,
      call: () => new Etcd({ endpoints: [endpoint], fetch: global }).withLock(`${run}/cold-global`, noop),
    },
    {
      name: "cold-node",
      counter: node,
      call: async () => {
        pool = createNodeFetch();
        try {
          await new Etcd({ endpoints: [endpoint], fetch: node }).withLock(`${run}/cold-node`, noop);
        } finally {
          void pool.close().catch(() => {});
        }
      },
    },
    {
      name: "cold-etcd3",
      call: async () => {
        const client = new Etcd3({ hosts: endpoint });
        try {
          await client.lock(`${run}/cold-etcd3`).do(noop);
        } finally {
          client.close();
        }
      },
    },
  ];
  return interleaved(contenders, options.rounds, (c) => timeCalls(c, options.coldCycles));
}

async function measureWarm(endpoint, options, run, cleanup) {
  const contenders = [];
  for (const kind of FETCH_KINDS) {
    const fetch = openFetch(kind);
    cleanup.push(() => fetch.close());
    for (const mode of LEASE_MODES) {
      const counter = countingFetch(fetch.sdk);
      const etcd = new Etcd({ endpoints: [endpoint], fetch: counter });
      // A client that keeps a lease across calls may offer a way to give it back; use it if there is one.
      cleanup.push(() => typeof etcd.close === "function" && bounded(etcd.close(), 3_000));
      const name = `${run}/warm-${kind}-${mode}`;
      contenders.push({
        name: `warm-${kind}-${mode}`,
        counter,
        call: () => etcd.withLock(name, noop, { lease: mode }),
      });
    }
  }
  const client = new Etcd3({ hosts: endpoint });
  cleanup.push(() => client.close());
  contenders.push({ name: "warm-etcd3", call: () => client.lock(`${run}/warm-etcd3`).do(noop) });
  return interleaved(contenders, options.rounds, (c) => timeCalls(c, options.cycles));
}

/** µs per call over `calls` calls, and the requests per call the contender's counting fetch saw. */
async function timeCalls(contender, calls) {
  const counter = contender.counter;
  counter?.reset();
  const start = performance.now();
  for (let i = 0; i < calls; i++) await contender.call();
  const micros = ((performance.now() - start) / calls) * 1000;
  if (counter === undefined) return { micros };
  const paths = [...counter.counts].map(([path, n]) => `${fmt(n / calls, 1)} ${path.replace("/v3/", "")}`).join(", ");
  return { micros, requests: counter.total() / calls, paths };
}
