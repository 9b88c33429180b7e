// §3 Distinct names: W concurrent workers, each locking its own name, so there is no contention and the
// figure is how many lock cycles per second each client sustains, with the CPU each cycle cost the client
// process and the etcd member (the two share the machine's cores). The headline compares one-shot locks
// (etcd-edge's withLock with its default lease mode vs etcd3's lock().do()); long-lived sessions (one per
// worker, lock+unlock) are shown beside them.
import { Etcd } from "etcd-edge";
import { Etcd3 } from "etcd3";
import { bounded, Tally } from "../lib/bounded.mjs";
import { EDGE_LABEL, FETCH_KINDS, FETCH_LABEL, openFetch } from "../lib/fetches.mjs";
import { GO_PEER, NO_GO_PEER, runGoPeer } from "../lib/go-peer.mjs";
import { cpuMicrosOf } from "../lib/cpu-time.mjs";
import { cpuPerRequest } from "../lib/request-cpu.mjs";
import { interleaved, numbersOf } from "../lib/rounds.mjs";
import { fmt, pairedRatio, ratioText, summarize, withSpread } from "../lib/stats.mjs";
import { meets } from "../lib/summary.mjs";
import { printTable } from "../lib/table.mjs";
import { runWorkers } from "../lib/workers.mjs";

const noop = () => {};

/** Go's Mutex on W distinct names for whole seconds, with the etcd CPU each cycle cost measured around it. */
async function goDistinct(endpoint, prefix, W, seconds, etcdPid) {
  const before = cpuMicrosOf(etcdPid);
  const result = await runGoPeer("distinct", endpoint, prefix, W, Math.max(1, Math.round(seconds)));
  const used = before === undefined ? NaN : cpuMicrosOf(etcdPid) - before;
  return { ...result, etcdCpu: used / result.cycles };
}

export async function distinctNames({ endpoint, etcdPid, options, summary, run }) {
  const widths = options.distinctW;
  console.log(
    `3. distinct names: W workers, each on its own name (cycles/s; ${options.tpRounds} rounds × ${options.seconds} s)`,
  );
  const fetches = Object.fromEntries(FETCH_KINDS.map((kind) => [kind, openFetch(kind)]));
  const clients = Object.fromEntries(
    FETCH_KINDS.map((kind) => [kind, new Etcd({ endpoints: [endpoint], fetch: fetches[kind].sdk })]),
  );
  const grpc = new Etcd3({ hosts: endpoint });
  const timeout = options.lockTimeout;
  const bound = 2 * timeout + 2_000;
  const rows = [];
  const ratios = { withLock: {}, session: {} };
  try {
    for (const W of widths) {
      const name = `${run}/w${W}`;
      const sessions = {};
      for (const kind of FETCH_KINDS) {
        sessions[kind] = await Promise.all(Array.from({ length: W }, () => clients[kind].session({ ttl: 30 })));
      }
      const contenders = [
        ...FETCH_KINDS.map((kind) => ({
          name: `withLock-${kind}`,
          cycle: (w) => clients[kind].withLock(`${name}/withLock-${kind}/${w}`, noop, { timeout }),
        })),
        { name: "etcd3", cycle: (w) => grpc.lock(`${name}/etcd3/${w}`).do(noop) },
        ...FETCH_KINDS.map((kind) => ({
          name: `session-${kind}`,
          cycle: async (w) =>
            (await sessions[kind][w].mutex(`${name}/session-${kind}/${w}`).lock({ timeout })).unlock({ timeout }),
        })),
        // Go's Mutex, a session per worker of one client, in the peer's process (whole seconds).
        ...(GO_PEER ? [{ name: "go", go: true }] : []),
      ];
      const results = await interleaved(contenders, options.tpRounds, (c, round) => {
        const seconds = round < 0 ? options.seconds / 2 : options.seconds;
        if (c.go) return goDistinct(endpoint, `${name}/go/${round + 1}`, W, seconds, etcdPid);
        return runWorkers(W, seconds, c.cycle, bound, etcdPid);
      });
      for (const kind of FETCH_KINDS) {
        await Promise.all(sessions[kind].map((s) => bounded(s.close({ timeout: 3_000 }), 5_000)));
      }
      const etcd3 = numbersOf(results.get("etcd3"), (r) => r.rate).values;
      for (const contender of contenders) {
        const { values, error } = numbersOf(results.get(contender.name), (r) => r.rate);
        const failures = new Tally();
        for (const r of results.get(contender.name)) if (r.failures) failures.merge(r.failures);
        const ratio = pairedRatio(values, etcd3);
        const [shape, kind] = contender.name.split("-");
        if (kind) ratios[shape][kind] = [...(ratios[shape][kind] ?? []), { W, ratio: ratio.median }];
        if (contender.go) {
          const cpu = (pick) => fmt(summarize(numbersOf(results.get("go"), pick).values).median);
          rows.push([
            `W=${String(W).padStart(2)}  Go concurrency.Mutex (gRPC), session`,
            withSpread(summarize(values)),
            ratioText(ratio),
            `${cpu((r) => r.cpuUsPerCycle)} + ${cpu((r) => r.etcdCpu)}`,
            error ? (error.message ?? "") : "none",
          ]);
          continue;
        }
        if (shape === "session" && GO_PEER && W === 16) {
          const vsGo = pairedRatio(values, numbersOf(results.get("go"), (r) => r.rate).values);
          // Informative: at W = 16 etcd's CPU bounds every client, and a request through the gateway costs etcd
          // more of it than the same request over gRPC (the CPU column shows by how much).
          summary.add(
            3,
            `distinct names W=16, session, ${FETCH_LABEL[kind]} ÷ Go's Mutex`,
            `${fmt(vsGo.median, 2)}×`,
            "etcd-bound",
            undefined,
          );
        }
        const label = kind
          ? `${EDGE_LABEL[kind]}, ${shape === "withLock" ? "withLock" : "session"}`
          : "etcd3 lock().do()";
        const cpu = (pick) => fmt(summarize(numbersOf(results.get(contender.name), pick).values).median);
        rows.push([
          `W=${String(W).padStart(2)}  ${label}`,
          withSpread(summarize(values)),
          kind ? ratioText(ratio) : "1.00×",
          `${cpu((r) => r.clientCpu)} + ${cpu((r) => r.etcdCpu)}`,
          error ? `${failures} (${error.code ?? error.message})` : failures.toString(),
        ]);
      }
    }
  } finally {
    grpc.close();
    for (const fetch of Object.values(fetches)) await fetch.close();
  }
  if (!GO_PEER) console.log(`   Go concurrency.Mutex: ${NO_GO_PEER}`);
  printTable(["W  contender", "cycles/s [min–max]", "÷ etcd3", "CPU µs/cycle: client + etcd", "failed calls"], rows, {
    align: "lrrrl",
  });
  // Many workers share two cores with etcd: what each request costs the client process bounds the rate.
  const perRequest = await cpuPerRequest(endpoint);
  const cost = Object.entries(perRequest).map(([client, stat]) => `${client} ${withSpread(stat)} µs`);
  console.log(`   client CPU per request, the HTTP client alone (serial reads of one key): ${cost.join("; ")}`);
  for (const [shape, targets] of [
    ["withLock", { node: 1.3, global: 1.0 }],
    ["session", { node: 1.3, global: 1.0 }],
  ]) {
    for (const kind of ["node", "global"]) {
      const points = (ratios[shape][kind] ?? []).filter((p) => p.W >= 4);
      if (points.length === 0) continue;
      const values = points.map((p) => p.ratio);
      const low = Math.min(...values);
      const range = `${fmt(low, 2)}–${fmt(Math.max(...values), 2)}×`;
      const Ws = `W=${points.map((p) => p.W).join(",")}`;
      summary.add(
        3,
        `distinct names, ${shape}, ${FETCH_LABEL[kind]} ÷ etcd3 (${Ws})`,
        range,
        `≥ ${targets[kind].toFixed(1)}×`,
        meets(low, ">=", targets[kind]),
      );
    }
  }
  console.log("");
}
