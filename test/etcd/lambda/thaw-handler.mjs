// A Lambda handler for the thawed-sandbox test (thawed.test.ts): a module-scope client set up as the README
// advises for Lambda (a short attempt timeout, so a pooled connection that died while the sandbox was frozen
// costs one short attempt), holding a lock across invocations so the test can ask it after a thaw.
import { Etcd } from "etcd-edge";
import { createNodeFetch } from "etcd-edge/node";

const fetch = globalThis.process?.env.THAW_FETCH === "node" ? createNodeFetch() : undefined;
const etcd = new Etcd({
  endpoints: (globalThis.process?.env.ETCD_ENDPOINTS ?? "http://127.0.0.1:2379").split(","),
  timeout: 5_000,
  attemptTimeout: 1_000,
  ...(fetch ? { fetch } : {}),
});

/** The lock a first invocation took and kept: stale once the sandbox was frozen past its lease. */
let kept;

export async function handler(event) {
  if (event.step === "hold") {
    const session = await etcd.session({ ttl: 2, keepAlive: "manual" });
    kept = await session.mutex(`${event.name}/kept`).lock();
    // A warm withLock, as the next invocation will run it: its connections stay in the pool.
    await etcd.withLock(`${event.name}/work`, () => {}, { ttl: 2, keepAlive: "manual" });
    return { held: kept.held };
  }
  const held = kept.held;
  const reason = kept.signal.aborted ? kept.signal.reason?.code : undefined;
  const started = performance.now();
  const result = await etcd.withLock(`${event.name}/work`, () => "done", { ttl: 2, keepAlive: "manual" });
  return { held, reason, result, ms: performance.now() - started };
}
