// §7 Round trips, as an edge function far from etcd sees them: a delay relay in front of etcd adds a round-trip
// time (RTT) to every exchange, and each operation's user-visible latency is reported in RTTs beside its
// physical floor (the round trips that must follow one another). At RTT 0 (no relay) the figures are ms.
// Cold: a fresh process's first withLock, from before its import, against the same three requests by hand
// after the same imports (both pay the runtime's own first-request setup), and etcd3's first lock().do().
// Warm: one client reused. Handoff: two processes on one name.
import { FETCH_KINDS, FETCH_LABEL } from "../lib/fetches.mjs";
import { GO_PEER, NO_GO_PEER, runGoPeer } from "../lib/go-peer.mjs";
import { coldLock } from "../lib/cold-lock.mjs";
import { startDelayRelay } from "../lib/delay-relay.mjs";
import { openHandoffPair } from "../lib/handoff-pair.mjs";
import { interleaved, numbersOf } from "../lib/rounds.mjs";
import { fmt, median, pairedRatio, quantile } from "../lib/stats.mjs";
import { meets } from "../lib/summary.mjs";
import { printTable } from "../lib/table.mjs";
import { ETCD3_ROWS, HAS_UNLOCK_WITH, timeCall, WARM_ROWS, warmContenders } from "../lib/warm-locks.mjs";

const COLD = [
  ...FETCH_KINDS.flatMap((fetch) => [
    { name: `edge-${fetch}`, who: "edge", fetch, what: `cold withLock, ${FETCH_LABEL[fetch]}` },
    { name: `raw-${fetch}`, who: "raw", fetch, what: `  raw grant + lock + release, ${FETCH_LABEL[fetch]}` },
  ]),
  { name: "etcd3", who: "etcd3", what: "cold etcd3 lock().do()" },
];
/** Cold: TCP's handshake, then the grant, the lock and the release, one after another. */
const COLD_FLOOR = 4;
const NO_UNLOCK_WITH = "n/a (this build has no unlockWith)";

export async function roundTrips({ endpoint, options, summary, run }) {
  const warmRtts = unique([0, ...options.rtt]);
  const coldRtts = unique([...options.coldRtt, ...warmRtts]);
  console.log(
    `7. round trips through a delay relay (RTT = 2 × its one-way delay; warm at ${warmRtts.join(", ")} ms, ` +
      `cold at ${coldRtts.join(", ")} ms; medians [p90] of ${options.rttRounds} rounds, ` +
      `${options.coldRounds} fresh processes for cold rows)`,
  );
  const cold = new Map();
  const warm = new Map();
  const lateness = [];
  for (const rtt of unique([...coldRtts, ...warmRtts])) {
    const relay = rtt > 0 ? await startDelayRelay(endpoint, rtt) : undefined;
    const url = relay?.url ?? endpoint;
    try {
      if (coldRtts.includes(rtt)) cold.set(rtt, await measureCold(url, options, `${run}/cold${rtt}`));
      if (warmRtts.includes(rtt)) warm.set(rtt, await measureWarm(url, rtt, options, `${run}/warm${rtt}`));
    } finally {
      await relay?.close();
    }
    const late = relay?.lateness ?? [];
    if (relay) lateness.push(`${fmt(median(late), 2)} [${fmt(quantile(late, 0.9), 2)}] ms at RTT ${rtt} ms`);
  }
  console.log(`   the relay's timers sent chunks past their due time by (median [p90]) ${lateness.join(", ")}`);
  console.log(
    "   Node's fetch and etcd-edge/node (undici) free a connection a macrotask after its answer, so a new " +
      "origin's second request opens a second one: an RTT more on both cold sides",
  );
  console.log("   in RTTs (ms at RTT 0): median [p90], then ÷ the floor; floor = round trips that must be sequential");
  printCold(cold, coldRtts, options.coldRtt, summary);
  printWarm(warm, warmRtts, summary);
  console.log("");
}

const unique = (list) => [...new Set(list)].sort((a, b) => a - b);

async function measureCold(url, options, run) {
  return interleaved(
    COLD,
    options.coldRounds,
    (c, round) => coldLock({ who: c.who, fetch: c.fetch, endpoint: url, name: `${run}/${c.name}/${round + 1}` }),
    { warmup: 1 },
  );
}

async function measureWarm(url, rtt, options, run) {
  const cleanup = [];
  try {
    const contenders = await warmContenders(url, run, cleanup);
    const results = await interleaved(contenders, options.rttRounds, timeCall);
    const handedOff = Object.fromEntries(
      contenders.filter((c) => c.handedOff).map((c) => [c.name, c.handedOff.calls > 0]),
    );
    for (const kind of FETCH_KINDS) results.set(`handoff-${kind}`, await measureHandoffs(url, rtt, kind, options, run));
    if (GO_PEER) {
      // Go's Mutex through the same relay: Lock + Unlock on one session, each cycle timed in its process; and
      // handoffs between two sessions of one client, from the unlock call to the next Lock returning.
      const cycles = await runGoPeer("cycles", url, `${run}/go-cycles`, options.rttRounds + 1).catch((error) => ({
        error,
      }));
      results.set("go-cycles", cycles.error ? [cycles] : cycles.latencies.slice(1).map((ms) => ({ ms })));
      const seconds = Math.max(2, Math.ceil((options.rttRounds * 4 * Math.max(rtt, 1)) / 1000));
      const hot = await runGoPeer("hot", url, `${run}/go-handoff`, 2, seconds, 0).catch((error) => ({ error }));
      results.set("go-handoff", hot.error ? [hot] : hot.latencies.map((ms) => ({ ms })));
    }
    return { results, handedOff };
  } finally {
    for (const step of cleanup.reverse())
      await Promise.resolve()
        .then(step)
        .catch(() => {});
  }
}

async function measureHandoffs(url, rtt, kind, options, run) {
  // Past its join the waiter opens its watch on the line: a few round trips and a margin let it settle.
  const pair = await openHandoffPair(url, kind, { settleMs: 3 * rtt + 25 });
  try {
    const results = [];
    for (let round = -1; round < options.rttRounds; round++) {
      let result;
      try {
        result = { ms: await pair.handoff(`${run}/handoff-${kind}/${round + 1}`) };
      } catch (error) {
        result = { error };
      }
      if (round >= 0) results.push(result);
    }
    return results;
  } finally {
    await pair.close();
  }
}

/** "2.03 [2.10]" in RTTs, or "4.1 [5.0] ms" at RTT 0. */
function cell(values, rtt) {
  if (values.length === 0) return "n/a";
  const [mid, p90] = [median(values), quantile(values, 0.9)];
  return rtt === 0 ? `${fmt(mid, 1)} [${fmt(p90, 1)}] ms` : `${fmt(mid / rtt, 2)} [${fmt(p90 / rtt, 2)}]`;
}

const perFloor = (values, rtt, floor) => (rtt === 0 ? "" : `${fmt(median(values) / rtt / floor, 2)}×`);

function header(first, rtts) {
  return [first, "floor", ...rtts.flatMap((rtt) => (rtt === 0 ? ["no relay"] : [`RTT ${rtt} ms`, "÷ floor"]))];
}

const align = (rtts) => `lr${rtts.map((rtt) => (rtt === 0 ? "r" : "rr")).join("")}l`;

/** `targetRtts`: where the summary holds the first withLock to the raw requests. */
function printCold(cold, rtts, targetRtts, summary) {
  const series = (rtt, name, pick = (r) => r.firstMs) => numbersOf(cold.get(rtt)?.get(name), pick).values;
  const rows = [];
  for (const c of COLD) {
    rows.push([
      c.what,
      String(COLD_FLOOR),
      ...rtts.flatMap((rtt) => {
        const values = series(rtt, c.name);
        return rtt === 0 ? [cell(values, 0)] : [cell(values, rtt), perFloor(values, rtt, COLD_FLOOR)];
      }),
      notes(c, rtts, cold),
    ]);
    if (c.who !== "raw") continue;
    // Paired by round: the two processes of a round ran one after the other, on the machine as it was then.
    const ratios = rtts.map((rtt) => {
      const [edge, raw] = [`edge-${c.fetch}`, c.name].map((name) => cold.get(rtt)?.get(name) ?? []);
      const values = edge.map((r, i) => r.firstMs / raw[i]?.firstMs).filter(Number.isFinite);
      return { median: median(values), p90: quantile(values, 0.9) };
    });
    rows.push([
      `  cold withLock ÷ raw, ${FETCH_LABEL[c.fetch]}, by round`,
      "",
      ...ratios.flatMap((ratio, i) => {
        const text = `${fmt(ratio.median, 2)}× [${fmt(ratio.p90, 2)}]`;
        return rtts[i] === 0 ? [text] : [text, ""];
      }),
      "",
    ]);
    const held = rtts.flatMap((rtt, i) => (targetRtts.includes(rtt) ? [[rtt, ratios[i].median]] : []));
    summary.add(
      7,
      `cold withLock ÷ raw requests from a fresh process, ${FETCH_LABEL[c.fetch]}`,
      held.map(([rtt, v]) => `${fmt(v, 2)}× at ${rtt} ms`).join(", "),
      "≤ 1.15×",
      allMeet(
        held.map(([, v]) => v),
        1.15,
      ),
    );
  }
  console.log("\n   cold: a fresh process, timed from before its import to its first lock released");
  printTable(header("what", rtts).concat("import ms, requests"), rows, { align: align(rtts) });
  for (const rtt of rtts) reportErrors(cold.get(rtt), `cold at RTT ${rtt}`);
}

/** The import's median ms and the requests the first call sent. */
function notes(c, rtts, cold) {
  const results = rtts.flatMap((rtt) => numbersOf(cold.get(rtt)?.get(c.name), (r) => r).values);
  const importMs = median(results.map((r) => r.importMs));
  const requests = median(results.map((r) => r.requests).filter(Number.isFinite));
  return `${fmt(importMs, 0)}${Number.isFinite(requests) ? `, ${fmt(requests)}` : ""}`;
}

function printWarm(warm, rtts, summary) {
  const series = (rtt, name) => numbersOf(warm.get(rtt)?.results.get(name), (r) => r.ms).values;
  const requests = (name) =>
    median(rtts.flatMap((rtt) => numbersOf(warm.get(rtt)?.results.get(name), (r) => r.requests).values));
  const line = (what, floor, name, extra = "") => [
    what,
    String(floor),
    ...rtts.flatMap((rtt) => {
      const values = series(rtt, name);
      return rtt === 0 ? [cell(values, 0)] : [cell(values, rtt), perFloor(values, rtt, floor)];
    }),
    extra,
  ];
  // A row with nothing measured: its reason once, in the first column of figures.
  const blank = (what, floor, text) => [what, String(floor), text, ...Array(2 * rtts.length - 1).fill(""), ""];
  const rows = [];
  const etcd3 = Object.fromEntries(ETCD3_ROWS.map((r) => [r.row, r]));
  const etcd3After = { withLock: "etcd3Lock", write: "etcd3Write" };
  for (const { row, what, floor } of WARM_ROWS) {
    for (const kind of FETCH_KINDS) {
      const name = `${row}-${kind}`;
      const label = `${what}, ${FETCH_LABEL[kind]}`;
      if (row === "releasing" && !HAS_UNLOCK_WITH) rows.push(blank(label, floor, NO_UNLOCK_WITH));
      else rows.push(line(label, floor, name, `${fmt(requests(name), 1)} requests`));
    }
    const e3 = etcd3[etcd3After[row]];
    if (e3) rows.push(line(e3.what, e3.floor, e3.row));
  }
  for (const kind of FETCH_KINDS)
    rows.push(line(`handoff between two processes, ${FETCH_LABEL[kind]}`, 1, `handoff-${kind}`, "unlock() → lock()"));
  rows.push(blank("  etcd3: no waiting line (its lock fails when held)", 1, "n/a"));
  if (GO_PEER) {
    rows.push(line("Go concurrency.Mutex Lock + Unlock (gRPC)", 2, "go-cycles"));
    rows.push(line("  Go handoff between two sessions of one client", 1, "go-handoff", "Unlock → Lock"));
  } else {
    rows.push(blank("Go concurrency.Mutex", 2, NO_GO_PEER));
  }
  console.log(
    "\n   warm: one client reused (the lease shared across calls); " +
      "handoff: A's unlock() call to B's lock() resolving, B already waiting",
  );
  printTable(header("what", rtts).concat("sent"), rows, { align: align(rtts) });
  for (const rtt of rtts) reportErrors(warm.get(rtt)?.results, `warm at RTT ${rtt}`);
  handedOffNote(warm, rtts);
  addWarmTargets(
    rtts.filter((rtt) => rtt > 0),
    series,
    summary,
  );
}

/** Whether withLock called waitUntil, and what that made of the latency. */
function handedOffNote(warm, rtts) {
  for (const kind of FETCH_KINDS) {
    const called = rtts.every((rtt) => warm.get(rtt)?.handedOff[`handedOff-${kind}`]);
    if (!called) console.log(`   ${FETCH_LABEL[kind]}: withLock never called waitUntil (this build ignores it)`);
  }
}

function addWarmTargets(rtts, series, summary) {
  if (rtts.length === 0) return;
  const inRtt = (name) => rtts.map((rtt) => median(series(rtt, name)) / rtt);
  const vs = (name, other) => rtts.map((rtt) => pairedRatio(series(rtt, name), series(rtt, other)).median);
  const at = (values, unit) => values.map((v, i) => `${fmt(v, 2)}${unit} at ${rtts[i]} ms`).join(", ");
  for (const kind of FETCH_KINDS) {
    const label = FETCH_LABEL[kind];
    if (HAS_UNLOCK_WITH) {
      const rtt = inRtt(`releasing-${kind}`);
      // Its floor by hand, for scale: on a busy machine etcd's own time per request is part of every RTT.
      const raw = inRtt(`raw-${kind}`).map((v) => fmt(v, 2));
      summary.add(
        7,
        `warm locked write with the releasing write, ${label}`,
        `${at(rtt, " RTT")} (2 raw requests: ${raw.join(", ")})`,
        "≤ 2.1 RTT",
        allMeet(rtt, 2.1),
      );
      const ratio = vs(`releasing-${kind}`, "etcd3Write");
      summary.add(7, `  the same ÷ etcd3 lock + put + unlock, ${label}`, at(ratio, "×"), "≤ 1×", allMeet(ratio, 1));
    } else {
      summary.add(7, `warm locked write with the releasing write, ${label}`, NO_UNLOCK_WITH, "≤ 2.1 RTT", undefined);
    }
    const handed = inRtt(`handedOff-${kind}`);
    const verdict = handed.every((v) => v <= 1.5) ? "release handed off" : "release not handed off";
    summary.add(
      7,
      `warm withLock, release handed to waitUntil, ${label}`,
      `${at(handed, " RTT")} (${verdict})`,
      "≤ 1.1 RTT",
      allMeet(handed, 1.1),
    );
    const ratio = vs(`handedOff-${kind}`, "etcd3Lock");
    summary.add(7, `  the same ÷ etcd3 lock().do(), ${label}`, at(ratio, "×"), "≤ 1×", allMeet(ratio, 1));
  }
}

/** true when every value meets `target` (≤), undefined when one is missing. */
function allMeet(values, target) {
  const each = values.map((v) => meets(v, "<=", target));
  return each.includes(undefined) ? undefined : each.every(Boolean);
}

function reportErrors(results, where) {
  for (const [name, result] of results ?? []) {
    const { error } = numbersOf(result);
    if (error) console.log(`   ${where}: ${name} failed in some rounds: ${error.code ?? ""} ${error.message}`);
  }
}
