// The bench's knobs: each has a default sized so a full run stays near 10 minutes on 2 cores (§7 adds up to
// 3), an environment variable (BENCH_<NAME>) and a flag (--<name> value). `--only 4,5` selects sections.

const KNOBS = {
  rounds: { env: "BENCH_ROUNDS", def: 15, help: "measured rounds in sections 1, 2 and 6 (after one warm-up round)" },
  cycles: { env: "BENCH_CYCLES", def: 200, help: "lock cycles per contender per round in sections 1 and 2 (warm)" },
  coldCycles: { env: "BENCH_COLD_CYCLES", def: 20, help: "cycles per contender per round for cold one-shot locks" },
  tpRounds: { env: "BENCH_TP_ROUNDS", def: 3, help: "measured rounds in sections 3 and 4" },
  seconds: { env: "BENCH_SECONDS", def: 1, help: "window per contender per round in section 3, seconds" },
  contendedSeconds: {
    env: "BENCH_CONTENDED_SECONDS",
    def: 2,
    help: "window per contender per round in section 4, seconds",
  },
  distinctW: { env: "BENCH_DISTINCT_W", def: "1,4,16,64", list: true, help: "worker counts in section 3" },
  contendedW: { env: "BENCH_CONTENDED_W", def: "2,4,16,64", list: true, help: "contender counts in section 4" },
  latencyW: { env: "BENCH_LATENCY_W", def: 16, help: "contender count whose handoff latency is reported" },
  holdMs: { env: "BENCH_HOLD_MS", def: 0, help: "hold time under a contended lock, ms (0: one macrotask)" },
  lockTimeout: {
    env: "BENCH_LOCK_TIMEOUT_MS",
    def: 3000,
    help: "timeout of every lock and unlock call in sections 3 and 4, ms",
  },
  waiters: { env: "BENCH_WAITERS", def: 1000, help: "waiters on one name in section 5" },
  deepTimeout: { env: "BENCH_DEEP_TIMEOUT_MS", def: 30000, help: "timeout of each waiter's lock() in section 5, ms" },
  cpuCycles: {
    env: "BENCH_CPU_CYCLES",
    def: 300000,
    help: "stub-fetch cycles in section 6 (split over its rounds, plus two rounds of warm-up)",
  },
  importRuns: { env: "BENCH_IMPORT_RUNS", def: 9, help: "fresh processes timing the cold import" },
  rtt: {
    env: "BENCH_RTT",
    def: "10,40",
    list: true,
    help: "round-trip times the delay relay adds in section 7, ms (RTT 0, no relay, is always run too)",
  },
  coldRtt: {
    env: "BENCH_COLD_RTT",
    def: "0,20",
    list: true,
    help: "further RTTs, ms, at which section 7 times cold locks",
  },
  rttRounds: {
    env: "BENCH_RTT_ROUNDS",
    def: 20,
    help: "measured rounds of warm calls and handoffs per RTT in section 7",
  },
  coldRounds: { env: "BENCH_COLD_ROUNDS", def: 8, help: "fresh processes per cold contender per RTT in section 7" },
  idleGap: { env: "BENCH_IDLE_GAP", def: 30, help: "seconds a function idles between calls in section 9" },
  idleRounds: { env: "BENCH_IDLE_ROUNDS", def: 3, help: "idle gaps timed in section 9" },
  proxyRtt: {
    env: "BENCH_PROXY_RTT",
    def: 20,
    help: "RTT the relay adds between the client and each proxy (or the member) in section 9's second pass, ms",
  },
};

export const SECTIONS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
/**
 * The order a full run takes: §6 first, on a machine nothing has loaded yet (it needs no etcd, and its cold
 * imports stand for a fresh process's start), then the others in turn.
 */
const RUN_ORDER = [6, 1, 2, 3, 4, 5, 7, 8, 9, 10];

export function parseOptions(argv, env = process.env) {
  const options = Object.fromEntries(Object.entries(KNOBS).map(([name, knob]) => [name, env[knob.env] ?? knob.def]));
  let only = RUN_ORDER;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--help" || arg === "-h") return { help: usage() };
    const [flag, inline] = arg.split("=", 2);
    const value = inline ?? argv[++i];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === "--only") {
      only = value.split(",").map(Number);
      if (only.some((n) => !SECTIONS.includes(n)))
        throw new Error(`--only takes section numbers among ${SECTIONS.join(",")}`);
      continue;
    }
    const name = flag.replace(/^--/, "").replace(/-(\w)/g, (_, c) => c.toUpperCase());
    if (!(name in KNOBS)) throw new Error(`unknown option ${arg}; try --help`);
    options[name] = value;
  }
  for (const [name, knob] of Object.entries(KNOBS)) {
    const raw = String(options[name]);
    options[name] = knob.list ? raw.split(",").map(Number) : Number(raw);
    const numbers = knob.list ? options[name] : [options[name]];
    if (numbers.some((n) => !Number.isFinite(n) || n < 0)) throw new Error(`${name} must be a number >= 0, got ${raw}`);
  }
  return { ...options, only };
}

function usage() {
  const lines = Object.entries(KNOBS).map(([name, knob]) => {
    const flag = `--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
    return `  ${flag.padEnd(22)} ${knob.env.padEnd(24)} ${knob.help} (default ${knob.def})`;
  });
  return [
    "npm run bench -- [--only 1,2,...] [--<knob> value]...",
    "Sections: 1 session lock, 2 one-shot withLock, 3 distinct names, 4 contended, 5 deep queue, 6 client cost,",
    "7 round trips: a relay in front of etcd delays each direction by RTT/2 (TCP's handshake costs one RTT too);",
    "  cold first withLock in a fresh process vs the same three raw requests (both from before the import) and",
    "  etcd3; warm withLock, locked write, releasing write (lock.unlockWith), release handed to waitUntil, a",
    "  two-process handoff, etcd3's equivalents; each in RTTs beside its floor (sequential round trips).",
    "9 through a proxy: nginx, HAProxy and Caddy as docs/deploying.md recommends, TLS at the proxy: warm withLock",
    "  and handoff p99 ÷ direct; a call after an idle gap ÷ a warm one, by etcd-edge/node keep-alive setting;",
    "  then the same with a relay adding --proxyRtt between the client and the proxy (or the member), as a network.",
    "8 a holding learns: ms from an outside delete or revocation to a lasting holding's signal (keepAlive auto).",
    "--etcd 3.4|3.5|3.6|3.7 (BENCH_ETCD, default 3.7): the version of the member started for the run, got as",
    "  the tests get it; 3.6 and 3.7 come with the Go peer (etcd's client/v3/concurrency) whose rows sit beside",
    "  the SDK's in sections 1, 3, 4 and 7.",
    "ETCD_ENDPOINTS=http://host:2379 uses that etcd instead of starting one (ETCD_EDGE_GO_PEER names a Go peer).",
    "Knobs (flag, environment variable):",
    ...lines,
  ].join("\n");
}
