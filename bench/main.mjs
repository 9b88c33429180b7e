// `npm run bench`: etcd-edge side by side with its raw floors and with the gRPC client etcd3, against one
// etcd on loopback (started here unless ETCD_ENDPOINTS is set), contenders interleaved in rounds.
// `npm run bench -- --help` lists the sections and the knobs that size them.
import { cpus, loadavg } from "node:os";
import { openBackend } from "../examples/demo/backend.mjs";
import { parseOptions } from "./lib/options.mjs";
import { Summary } from "./lib/summary.mjs";
import { clientCost } from "./sections/client-cost.mjs";
import { contended } from "./sections/contended.mjs";
import { deepQueue } from "./sections/deep-queue.mjs";
import { distinctNames } from "./sections/distinct-names.mjs";
import { holdingLearns } from "./sections/holding-learns.mjs";
import { oneShot } from "./sections/one-shot.mjs";
import { roundTrips } from "./sections/round-trips.mjs";
import { sessionLock } from "./sections/session-lock.mjs";
import { lockDelay } from "./sections/lock-delay.mjs";
import { throughProxy } from "./sections/through-proxy.mjs";

const SECTIONS = {
  1: sessionLock,
  2: oneShot,
  3: distinctNames,
  4: contended,
  5: deepQueue,
  6: clientCost,
  7: roundTrips,
  8: holdingLearns,
  9: throughProxy,
  10: lockDelay,
};
const NEEDS_ETCD = [1, 2, 3, 4, 5, 7, 8, 9, 10];

let options;
try {
  options = parseOptions(process.argv.slice(2));
} catch (error) {
  console.error(error.message);
  process.exit(2);
}
if (options.help) {
  console.log(options.help);
  process.exit(0);
}

// A call the bench gave up on may still fail later inside the SDK; count such failures, never crash on them.
let strayRejections = 0;
process.on("unhandledRejection", () => strayRejections++);

const summary = new Summary();
const needsEtcd = options.only.some((n) => NEEDS_ETCD.includes(n));
const backend = needsEtcd ? await openBackend() : undefined;
if (backend?.fetch) {
  console.error("the bench needs a real etcd: set ETCD_ENDPOINTS or put etcd on PATH");
  process.exit(1);
}
const endpoint = backend?.endpoints[0];
const run = `bench/${Date.now().toString(36)}`;
console.log(`etcd-edge bench${backend ? ` against ${backend.description}` : ""}`);
// Other processes on the machine show up as spread; the load average says how busy it was.
const load = () => loadavg()[0].toFixed(1);
console.log(
  `node ${process.version}, ${cpus().length} cores, load average ${load()}; sections ${options.only.join(",")}\n`,
);

let failed = false;
const started = performance.now();
try {
  for (const n of options.only) {
    try {
      await SECTIONS[n]({ endpoint, etcdPid: backend?.pid, options, summary, run: `${run}/${n}` });
    } catch (error) {
      failed = true;
      console.log(`   section ${n} failed: ${error.code ?? ""} ${error.stack ?? error}\n`);
    }
  }
} finally {
  await backend?.close();
}
summary.print();
console.log(
  `\n  ${((performance.now() - started) / 1000).toFixed(0)} s in all; ` +
    `load average ${load()} at the end; late rejections inside abandoned calls: ${strayRejections}`,
);
// Calls abandoned on a wedged connection pool may hold sockets open: the run is over, so leave.
process.exit(failed ? 1 : 0);
