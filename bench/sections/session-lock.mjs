// §1 Uncontended lock+unlock on a live session reused across cycles: etcd-edge with each fetch, its raw
// floor on the same fetch (the same requests written by hand, really taking and releasing a lock), that floor
// with a deadline per request (which the SDK must give every request), and etcd3 sending the same two
// transactions on a reused lease.
import { Etcd } from "etcd-edge";
import { Etcd3 } from "etcd3";
import { etcd3Mutex } from "../lib/etcd3-lock.mjs";
import { countingFetch, EDGE_LABEL, FETCH_KINDS, FETCH_LABEL, openFetch } from "../lib/fetches.mjs";
import { GO_PEER, NO_GO_PEER, runGoPeer } from "../lib/go-peer.mjs";
import { floorMatches, grantRawLease, keyRandom, rawMutex, revokeRawLease, withDeadline } from "../lib/raw-lock.mjs";
import { interleaved, numbersOf } from "../lib/rounds.mjs";
import { fmt, pairedRatio, ratioText, summarize, withSpread } from "../lib/stats.mjs";
import { meets } from "../lib/summary.mjs";
import { printTable } from "../lib/table.mjs";

export async function sessionLock({ endpoint, options, summary, run }) {
  console.log(
    `1. uncontended lock+unlock on a live session (${options.rounds} rounds × ${options.cycles} cycles, µs/cycle)`,
  );
  const cleanup = [];
  const contenders = [];
  try {
    for (const kind of FETCH_KINDS) {
      const fetch = openFetch(kind);
      cleanup.push(() => fetch.close());
      const etcd = new Etcd({ endpoints: [endpoint], fetch: fetch.sdk });
      const session = await etcd.session({ ttl: 60 });
      cleanup.push(() => session.close({ timeout: 3_000 }));
      const mutex = session.mutex(`${run}/edge-${kind}`);
      contenders.push({ name: `edge-${kind}`, cycle: async () => (await mutex.lock()).unlock() });

      const leaseId = await grantRawLease(fetch.send, endpoint, 300);
      cleanup.push(() => revokeRawLease(fetch.send, endpoint, leaseId));
      const raw = rawMutex(fetch.send, endpoint, `${run}/raw-${kind}`, leaseId);
      contenders.push({ name: `raw-${kind}`, cycle: async () => raw.unlock(await raw.lock()) });
      const bounded = rawMutex(withDeadline(fetch.send), endpoint, `${run}/deadline-${kind}`, leaseId);
      contenders.push({ name: `deadline-${kind}`, cycle: async () => bounded.unlock(await bounded.lock()) });
    }
    const client = new Etcd3({ hosts: endpoint });
    cleanup.push(() => client.close());
    const lease = client.lease(60);
    const leaseId = await lease.grant();
    cleanup.push(() => lease.revoke());
    const grpc = etcd3Mutex(client, `${run}/etcd3`, leaseId);
    contenders.push({ name: "etcd3", cycle: async () => grpc.unlock(await grpc.lock()) });
    // Go's Mutex on a session of its own, timed inside its process (its start is not counted).
    if (GO_PEER) {
      const cycles = async () => (await runGoPeer("cycles", endpoint, `${run}/go`, options.cycles)).usPerCycle;
      contenders.push({ name: "go", measure: cycles });
    }

    await reportFloorMatch(endpoint, run);
    console.log(
      "   etcd3's lock API grants a lease per lock, " +
        "so its row sends etcd-edge's two transactions through etcd3's KV API on one reused lease",
    );
    console.log(
      "   the floor with a deadline per request adds only what the SDK must give each request (a controller, a " +
        "timer); its ÷ is to the bare floor",
    );
    const results = await interleaved(contenders, options.rounds, (c) =>
      c.measure ? c.measure() : microsPerCycle(c.cycle, options.cycles),
    );
    const series = (name) => numbersOf(results.get(name)).values;
    const etcd3 = series("etcd3");
    const rows = [];
    for (const kind of FETCH_KINDS) {
      const edge = series(`edge-${kind}`);
      const raw = series(`raw-${kind}`);
      const floor = pairedRatio(edge, raw);
      const vsEtcd3 = pairedRatio(etcd3, edge);
      rows.push([EDGE_LABEL[kind], withSpread(summarize(edge)), ratioText(floor), ratioText(vsEtcd3)]);
      // The floor's own ratio bounds the SDK's: no client of the gateway beats the same requests by hand.
      rows.push([
        `  raw floor, ${FETCH_LABEL[kind]}`,
        withSpread(summarize(raw)),
        "",
        ratioText(pairedRatio(etcd3, raw)),
      ]);
      const deadline = series(`deadline-${kind}`);
      rows.push([
        "  the floor, a deadline per request",
        withSpread(summarize(deadline)),
        ratioText(pairedRatio(deadline, raw)),
        ratioText(pairedRatio(etcd3, deadline)),
      ]);
      summary.add(
        1,
        `session lock ÷ raw floor, ${FETCH_LABEL[kind]}`,
        `${fmt(floor.median, 2)}×`,
        "≤ 1.10×",
        meets(floor.median, "<=", 1.1),
      );
      if (kind === "node") {
        summary.add(
          1,
          "session lock throughput, etcd-edge/node ÷ etcd3",
          `${fmt(vsEtcd3.median, 2)}×`,
          "≥ 1.3×",
          meets(vsEtcd3.median, ">=", 1.3),
        );
      }
    }
    rows.push(["etcd3 (gRPC), same txns, reused lease", withSpread(summarize(etcd3)), "", "1.00×"]);
    if (GO_PEER) {
      const go = series("go");
      rows.push([
        "Go concurrency.Mutex (gRPC), own session",
        withSpread(summarize(go)),
        "",
        ratioText(pairedRatio(etcd3, go)),
      ]);
      // The gateway's own floor (the same requests by hand) sets how near Go any gateway client can come: the
      // SDK is held to that floor's ratio, not to Go's.
      for (const kind of FETCH_KINDS) {
        const vsGo = pairedRatio(series(`edge-${kind}`), go).median;
        const floorVsGo = pairedRatio(series(`deadline-${kind}`), go).median;
        summary.add(
          1,
          `session lock µs/cycle ÷ Go's Mutex, ${FETCH_LABEL[kind]} (the gateway floor's ÷ Go)`,
          `${fmt(vsGo, 2)}× (${fmt(floorVsGo, 2)}×)`,
          "≤ 1.10 × the floor's",
          meets(vsGo, "<=", 1.1 * floorVsGo),
        );
      }
    }
    printTable(["contender", "µs/cycle [min–max]", "÷ its floor", "throughput ÷ etcd3"], rows);
    if (!GO_PEER) console.log(`   Go concurrency.Mutex: ${NO_GO_PEER}`);
    for (const [name, result] of results) {
      const { error } = numbersOf(result);
      if (error) console.log(`   ${name} failed in some rounds: ${error.code ?? ""} ${error.message}`);
    }
  } finally {
    for (const step of cleanup.reverse())
      await Promise.resolve()
        .then(step)
        .catch(() => {});
  }
  console.log("");
}

async function microsPerCycle(cycle, cycles) {
  const start = performance.now();
  for (let i = 0; i < cycles; i++) await cycle();
  return ((performance.now() - start) / cycles) * 1000;
}

/** Checks that the floor sends what the SDK sends today, so the ratio compares like with like. */
async function reportFloorMatch(endpoint, run) {
  const name = `${run}/capture`;
  const capturing = countingFetch(undefined);
  const bodies = [];
  const etcd = new Etcd({
    endpoints: [endpoint],
    fetch: (url, init) => {
      if (url.endsWith("/v3/kv/txn")) bodies.push(init.body);
      return capturing(url, init);
    },
  });
  const session = await etcd.session({ ttl: 10 });
  try {
    bodies.length = 0;
    capturing.reset();
    await (await session.mutex(name).lock()).unlock();
    const requests = [...capturing.counts].map(([path, n]) => `${n}× ${path}`).join(", ");
    const check = floorMatches(
      { enqueue: bodies[0], unlock: bodies[1] },
      rawMutex(undefined, endpoint, name, session.leaseId, keyRandom(bodies[0])),
    );
    const verdict = check.match
      ? "yes"
      : `NO (enqueue ${check.enqueue ? "same" : "differs"}, unlock ${check.unlock ? "same" : "differs"}): ` +
        "update bench/lib/raw-lock.mjs";
    console.log(`   the SDK sent ${requests}; the raw floor sends the same bodies: ${verdict}`);
  } finally {
    await session.close().catch(() => {});
  }
}
