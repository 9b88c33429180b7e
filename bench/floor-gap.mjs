// What separates a session's lock+unlock from its raw floor (§1), by hand (not part of `npm run bench`):
//   npm run --silent build && node bench/floor-gap.mjs [--rounds 12] [--cycles 150] [--fetch global,node]
// Against a local etcd (started here unless ETCD_ENDPOINTS is set). The floor's two requests are sent as §1
// sends them, then with what the SDK's transport adds to every request, one thing at a time: an AbortSignal
// bound to a deadline timer (each attempt has one), `redirect: "manual"` (a redirect is refused, never
// followed), and a body read through its stream with a byte cap instead of `text()` (an answer's size is
// never trusted); then all three; then the SDK itself. Rounds are interleaved; each row is its paired ratio
// to the floor, in time per cycle and in this process's CPU per cycle (all threads: GC helpers included).
// What the "all three" row leaves of the SDK's ratio is the SDK's own work per cycle.
import { Etcd } from "etcd-edge";
import { openBackend } from "../examples/demo/backend.mjs";
import { flagValue } from "./lib/args.mjs";
import { openFetch } from "./lib/fetches.mjs";
import { grantRawLease, rawMutex, revokeRawLease } from "./lib/raw-lock.mjs";
import { interleaved, numbersOf } from "./lib/rounds.mjs";
import { pairedRatio, ratioText } from "./lib/stats.mjs";
import { printTable } from "./lib/table.mjs";

const rounds = Number(flagValue("rounds", 12));
const cycles = Number(flagValue("cycles", 150));
const kinds = flagValue("fetch", "global,node").split(",");

/** The transport's additions to a request, each one switchable. */
const VARIANTS = [
  ["floor (§1's raw requests)", {}],
  ["+ a deadline signal per request", { signal: true }],
  ['+ redirect: "manual"', { manual: true }],
  ["+ a capped read of the body stream", { capped: true }],
  ["+ all three", { signal: true, manual: true, capped: true }],
];
const ATTEMPT_MS = 10_000;
const CAP = 4 * 1024 * 1024;

/** `send` wrapped with what `adds` switches on; the answer is read before it resolves, as the SDK does. */
function sending(send, adds) {
  return async (url, init) => {
    let deadline;
    if (adds.signal) {
      const controller = new AbortController();
      deadline = setTimeout(() => controller.abort(), ATTEMPT_MS);
      init = { ...init, signal: controller.signal };
    }
    if (adds.manual) init = { ...init, redirect: "manual" };
    try {
      const response = await send(url, init);
      const text = adds.capped ? await cappedText(response.body) : await response.text();
      return { status: response.status, text: async () => text };
    } finally {
      clearTimeout(deadline);
    }
  };
}

async function cappedText(body) {
  const reader = body.getReader();
  const chunks = [];
  let length = 0;
  for (;;) {
    const { done, value: chunk } = await reader.read();
    if (done) break;
    length += chunk.length;
    if (length > CAP) throw new Error("answer over the cap");
    chunks.push(chunk);
  }
  const bytes = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  return new TextDecoder().decode(bytes);
}

const backend = await openBackend();
if (backend.fetch) {
  console.error("the floor gap needs a real etcd: set ETCD_ENDPOINTS or put etcd on PATH");
  process.exit(1);
}
const endpoint = backend.endpoints[0];
const run = `floor-gap/${Date.now().toString(36)}`;
console.log(`floor gap against ${backend.description}: ${rounds} rounds × ${cycles} cycles, interleaved`);
const cleanup = [];
try {
  const contenders = [];
  for (const kind of kinds) {
    const fetch = openFetch(kind);
    cleanup.push(() => fetch.close());
    const lease = await grantRawLease(fetch.send, endpoint, 300);
    cleanup.push(() => revokeRawLease(fetch.send, endpoint, lease));
    VARIANTS.forEach(([label, adds], i) => {
      const mutex = rawMutex(sending(fetch.send, adds), endpoint, `${run}/${kind}-${i}`, lease);
      contenders.push({ name: `${kind} ${i}`, kind, label, cycle: async () => mutex.unlock(await mutex.lock()) });
    });
    const etcd = new Etcd({ endpoints: [endpoint], fetch: fetch.sdk });
    const session = await etcd.session({ ttl: 60 });
    cleanup.push(() => session.close({ timeout: 3_000 }));
    const mutex = session.mutex(`${run}/${kind}-sdk`);
    contenders.push({
      name: `${kind} sdk`,
      kind,
      label: "etcd-edge",
      cycle: async () => (await mutex.lock()).unlock(),
    });
  }
  const results = await interleaved(contenders, rounds, async (c) => {
    const cpu = process.cpuUsage();
    const start = performance.now();
    for (let i = 0; i < cycles; i++) await c.cycle();
    const used = process.cpuUsage(cpu);
    return { micros: ((performance.now() - start) / cycles) * 1000, cpu: (used.user + used.system) / cycles };
  });
  const series = (name, key) => numbersOf(results.get(name), (r) => r[key]).values;
  for (const kind of kinds) {
    const floor = { micros: series(`${kind} 0`, "micros"), cpu: series(`${kind} 0`, "cpu") };
    const rows = contenders
      .filter((c) => c.kind === kind)
      .map((c) => [
        c.label,
        ratioText(pairedRatio(series(c.name, "micros"), floor.micros)),
        ratioText(pairedRatio(series(c.name, "cpu"), floor.cpu)),
        ratioText(pairedRatio(series(c.name, "cpu"), floor.micros)),
      ]);
    console.log(`\n${kind === "node" ? "etcd-edge/node" : "global fetch"}`);
    printTable(["lock+unlock", "time ÷ floor", "CPU ÷ floor's CPU", "CPU ÷ floor's time"], rows);
  }
} finally {
  for (const step of cleanup.reverse())
    await Promise.resolve()
      .then(step)
      .catch(() => {});
  await backend.close();
}
process.exit(0);
