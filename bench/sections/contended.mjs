// §4 One hot name: W contenders loop lock → tiny hold → unlock for a fixed time. etcd-edge (a session per
// contender, on each fetch; a fresh client and pool per run, so a pool wedged by one run cannot slow the
// next) against etcd3's lock retried with a small backoff (it fails fast when held). Reports handoffs/s,
// the handoff latency at W = latencyW, first-come-first-served order, failures by code, and for
// etcd-edge the requests each acquisition cost.
import { Tally } from "../lib/bounded.mjs";
import { EDGE_LABEL, FETCH_KINDS, FETCH_LABEL } from "../lib/fetches.mjs";
import { GO_PEER, NO_GO_PEER, runGoPeer } from "../lib/go-peer.mjs";
import { hotNameEdge, hotNameEtcd3 } from "../lib/hot-name.mjs";
import { interleaved, numbersOf } from "../lib/rounds.mjs";
import { fmt, pairedRatio, quantile, ratioText, summarize, withSpread } from "../lib/stats.mjs";
import { meets } from "../lib/summary.mjs";
import { printTable } from "../lib/table.mjs";

export async function contended({ endpoint, options, summary, run }) {
  console.log(
    `4. one hot name, W contenders looping lock → hold ${options.holdMs} ms → unlock ` +
      `(${options.tpRounds} rounds × ${options.contendedSeconds} s; ` +
      `every call times out after ${options.lockTimeout} ms)`,
  );
  const contenders = [
    ...FETCH_KINDS.map((kind) => ({ name: kind, kind })),
    { name: "etcd3" },
    ...(GO_PEER ? [{ name: "go", go: true }] : []),
  ];
  const rows = [];
  const latencyRows = [];
  const order = new Map(FETCH_KINDS.map((kind) => [kind, { overtakes: 0, acquired: 0 }]));
  const goRates = new Map();
  // Latency at latencyW, and at W = 4 too, where the Go rows are compared as well.
  const latencyAt = (W) => W === options.latencyW || W === 4;
  for (const W of options.contendedW) {
    const results = await interleaved(contenders, options.tpRounds, (c, round) => {
      const seconds = round < 0 ? options.contendedSeconds / 4 : options.contendedSeconds;
      const name = `${run}/w${W}/${c.name}/${round + 1}`;
      const spec = {
        endpoint,
        kind: c.kind,
        workers: W,
        seconds,
        name,
        timeout: options.lockTimeout,
        holdMs: options.holdMs,
      };
      if (c.go) return hotNameGo(spec);
      return c.kind ? hotNameEdge(spec) : hotNameEtcd3(spec);
    });
    const etcd3 = numbersOf(results.get("etcd3"), (r) => r.rate).values;
    for (const c of contenders) {
      if (c.go) {
        const d = describeGo(results.get(c.name), etcd3);
        rows.push([
          `W=${String(W).padStart(2)}  ${label(c)}`,
          withSpread(d.rate),
          ratioText(d.ratio),
          "",
          d.failed,
          "",
        ]);
        if (latencyAt(W)) latencyRows.push(latencyRow(W, c, d));
        goRates.set(W, d.rate.values);
        continue;
      }
      const d = describe(results.get(c.name), etcd3);
      const costs = c.kind
        ? `txn ${fmt(d.requests.txn, 2)}, range ${fmt(d.requests.range, 2)}, watch ${fmt(d.requests.watch, 2)}`
        : "";
      rows.push([
        `W=${String(W).padStart(2)}  ${label(c)}`,
        withSpread(d.rate),
        c.kind ? ratioText(d.ratio) : "1.00×",
        d.fifo,
        d.failed,
        costs,
      ]);
      if (latencyAt(W)) latencyRows.push(latencyRow(W, c, d));
      if (!c.kind) continue;
      const seen = order.get(c.kind);
      seen.overtakes += d.overtakes;
      seen.acquired += d.acquired;
      const which = `W=${W}, ${FETCH_LABEL[c.kind]}`;
      const go = goRates.get(W);
      if (go && (W === 4 || W === 16)) {
        const vsGo = pairedRatio(numbersOf(results.get(c.name), (r) => r.rate).values, go);
        summary.add(
          4,
          `hot name ${which}: handoffs/s ÷ Go's Mutex`,
          `${fmt(vsGo.median, 2)}×`,
          "≥ 1×",
          meets(vsGo.median, ">=", 1),
        );
      }
      if (W === 4 || W === 16) {
        const pass = meets(d.rate.median, ">=", 400) && meets(d.ratio.median, ">=", 0.4);
        summary.add(
          4,
          `hot name ${which}: handoffs/s, ÷ etcd3 retry loop`,
          `${fmt(d.rate.median)}/s, ${fmt(d.ratio.median, 2)}×`,
          "≥ 400/s, ≥ 0.4×",
          pass,
        );
      }
      if (W === options.latencyW) {
        summary.add(4, `handoff p99, ${which}`, `${fmt(d.p99, 1)} ms`, "≤ 10 ms", meets(d.p99, "<=", 10));
        const cost = `${fmt(d.requests.range, 2)} + ${fmt(d.requests.watch, 2)}`;
        summary.add(
          4,
          `reads + watches per acquisition, ${which}`,
          cost,
          "≤ 1 + 1",
          meets(Math.max(d.requests.range, d.requests.watch), "<=", 1),
        );
      }
    }
  }
  for (const [kind, { overtakes, acquired }] of order) {
    const text =
      acquired === 0
        ? "nothing acquired"
        : overtakes === 0
          ? `yes (${acquired} acquisitions)`
          : `no (${overtakes} of ${acquired} overtook)`;
    summary.add(
      4,
      `FIFO order kept, ${FETCH_LABEL[kind]} (every W)`,
      text,
      "yes",
      acquired === 0 ? undefined : overtakes === 0,
    );
  }
  if (!GO_PEER) console.log(`   Go concurrency.Mutex: ${NO_GO_PEER}`);
  printTable(
    ["W  contender", "handoffs/s [min–max]", "÷ etcd3", "FIFO", "failed calls", "requests per acquisition"],
    rows,
    { align: "lrrlll" },
  );
  if (latencyRows.length > 0) {
    console.log(
      `\n   handoff latency at W=${[...new Set([4, options.latencyW])].join(", ")} (ms from the holder's unlock() ` +
        `call to the next waiter's lock() resolving, all rounds):`,
    );
    printTable(["W  contender", "p50", "p99", "max", "handoffs"], latencyRows);
  }
  console.log("");
}

/** One contender's row of the handoff latency table at W. */
function latencyRow(W, c, d) {
  return [`W=${W}  ${label(c)}`, fmt(d.p50, 2), fmt(d.p99, 2), fmt(d.maxLatency, 1), String(d.latencies)];
}

function label(c) {
  if (c.go) return "Go concurrency.Mutex (gRPC)";
  return c.kind ? EDGE_LABEL[c.kind] : "etcd3 lock() retried";
}

/** Go's Mutex on the hot name: W sessions of one client in the peer's process, timed there. */
async function hotNameGo({ endpoint, workers, seconds, name, holdMs }) {
  return runGoPeer("hot", endpoint, name, workers, Math.max(1, Math.round(seconds)), holdMs);
}

/** The Go peer's runs at one W, pooled: rate and its ratio to etcd3, latency. */
function describeGo(runs, etcd3) {
  const { values, error } = numbersOf(runs, (r) => r.rate);
  const latencies = runs.flatMap((r) => r.latencies ?? []);
  return {
    rate: { ...summarize(values), values },
    ratio: pairedRatio(values, etcd3),
    failed: error ? (error.message ?? String(error)) : "",
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    maxLatency: latencies.length ? Math.max(...latencies) : NaN,
    latencies: latencies.length,
  };
}

/** One contender's runs at one W, pooled: rate and its ratio to etcd3, order, failures, latency, requests. */
function describe(runs, etcd3) {
  const { values, error } = numbersOf(runs, (r) => r.rate);
  const ok = runs.filter((r) => r.log);
  const sum = (f) => ok.reduce((n, r) => n + f(r), 0);
  const acquired = sum((r) => r.log.acquisitions.length);
  const overtakes = sum((r) => r.log.overtakes());
  const late = sum((r) => r.late);
  const failures = new Tally();
  for (const r of ok) failures.merge(r.log.failures);
  const latencies = ok.flatMap((r) => r.log.latencies);
  const perAcquisition = (path) => sum((r) => r.requests?.get(path) ?? 0) / acquired;
  return {
    rate: summarize(values),
    ratio: pairedRatio(values, etcd3),
    acquired,
    overtakes,
    fifo: acquired === 0 ? "n/a" : overtakes === 0 ? "yes" : `no (${overtakes} of ${acquired} overtook)`,
    failed: `${error ? `${error.code ?? error.message}; ` : ""}${failures}${late ? `; late ${late}` : ""}`,
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    maxLatency: latencies.length ? Math.max(...latencies) : NaN,
    latencies: latencies.length,
    requests: {
      txn: perAcquisition("/v3/kv/txn"),
      range: perAcquisition("/v3/kv/range"),
      watch: perAcquisition("/v3/watch"),
    },
  };
}
