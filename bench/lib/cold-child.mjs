// One fresh process's first lock, run by the round-trip section (and by hand under `node --cpu-prof`):
//   node bench/lib/cold-child.mjs '{"who":"edge"|"raw"|"etcd3","fetch":"global"|"node"|"stub","endpoint":...,
//                                   "name":...,"warm":0,"prime":false}'
// The clock starts before the first import, so the import and the runtime's own first-request setup count
// on every side alike. "edge": etcd-edge's first `withLock`; "raw": the same three requests by hand (lease
// grant, the SDK's lock transaction, its release) after the same imports; "etcd3": etcd3's first
// `lock().do()`. "stub" answers at once with canned bodies (bench/lib/stub-gateway.mjs): no network, no
// runtime fetch, only the client's own first-call work. `warm` > 0 then times that many more calls of the
// same kind, for first ÷ warm. `prime` sends one request (GET /health) through the same fetch first, so the
// runtime's own first-request setup is paid before the first call (then `callMs`, the first call alone, is
// the client's first-call cost).
// Prints one JSON line: { importMs, firstMs, callMs, callCpuMs, callUs, requests, warmMs?, warmCpuMs? }
// (`callUs`: the first call's start and end on the monotonic clock CPU profiles use; the CPU times are this
// process's, all threads) and exits (a kept lease must not keep it alive).
const started = performance.now();
const spec = JSON.parse(process.argv[2]);
const noop = () => {};
const since = (t) => performance.now() - t;

/** The fetch of `spec.fetch`, counting requests; after the imports a user of it would make. */
async function openFetch() {
  if (spec.fetch === "node") return counting((await import("etcd-edge/node")).createNodeFetch());
  if (spec.fetch === "stub") return counting((await import("./stub-gateway.mjs")).stubGateway(spec).fetch);
  return counting(undefined);
}

async function edge() {
  const { Etcd } = await import("etcd-edge");
  const fetch = await openFetch();
  const importMs = since(started);
  const etcd = new Etcd({ endpoints: [spec.endpoint], fetch });
  return { importMs, fetch, call: (i) => etcd.withLock(`${spec.name}/${i}`, noop) };
}

async function raw() {
  await import("etcd-edge");
  const fetch = await openFetch();
  const { grantRawLease, rawMutex } = await import("./raw-lock.mjs");
  const importMs = since(started);
  let lease;
  const call = async (i) => {
    // As the SDK's shared lease: granted by the first call only.
    lease ??= await grantRawLease(fetch, spec.endpoint, 60);
    const mutex = rawMutex(fetch, spec.endpoint, `${spec.name}/${i}`, lease);
    await mutex.unlock(await mutex.lock());
  };
  return { importMs, fetch, call };
}

async function etcd3() {
  const { Etcd3 } = await import("etcd3");
  const importMs = since(started);
  const client = new Etcd3({ hosts: spec.endpoint });
  return { importMs, call: (i) => client.lock(`${spec.name}/${i}`).do(noop) };
}

/** Counts requests (the global fetch when `inner` is undefined, looked up per call as the SDK does). */
function counting(inner) {
  const fetch = (url, init) => {
    fetch.requests++;
    return (inner ?? globalThis.fetch)(url, init);
  };
  fetch.requests = 0;
  return fetch;
}

const setup = await { edge, raw, etcd3 }[spec.who]();
if (spec.prime) {
  await (await (setup.fetch ?? globalThis.fetch)(`${spec.endpoint}/health`, { method: "GET" })).text();
  if (setup.fetch) setup.fetch.requests = 0;
}
const micros = () => Number(process.hrtime.bigint() / 1000n);
const callStarted = performance.now();
const callUs = [micros()];
const cpu = process.cpuUsage();
await setup.call(0);
callUs.push(micros());
const cpuMs = (({ user, system }) => (user + system) / 1000)(process.cpuUsage(cpu));
const result = {
  importMs: setup.importMs,
  firstMs: since(started),
  callMs: since(callStarted),
  callUs,
  callCpuMs: cpuMs,
  requests: setup.fetch?.requests,
};
if (spec.warm > 0) {
  const times = [];
  const warmCpu = process.cpuUsage();
  for (let i = 1; i <= spec.warm; i++) {
    const t = performance.now();
    await setup.call(i);
    times.push(since(t));
  }
  const { user, system } = process.cpuUsage(warmCpu);
  result.warmMs = times.sort((a, b) => a - b)[Math.floor(times.length / 2)];
  result.warmCpuMs = (user + system) / 1000 / spec.warm;
}
console.log(JSON.stringify(result));
process.exit(0);
