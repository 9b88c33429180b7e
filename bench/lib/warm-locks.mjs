// The warm contenders of the round-trip section: one client per fetch reused across calls (the lease
// shared across them, as `withLock` keeps it by default), and etcd3's equivalents on one gRPC channel.
// Each contender's `call()` is one user-visible operation; `after()` (if any) is work the user does not
// wait for (a release handed to waitUntil), done before the next call.
import { Etcd, Lock, op } from "etcd-edge";
import { Etcd3 } from "etcd3";
import { bounded } from "./bounded.mjs";
import { countingFetch, FETCH_KINDS, openFetch } from "./fetches.mjs";
import { grantRawLease, rawMutex, revokeRawLease } from "./raw-lock.mjs";

const noop = () => {};

/** Whether this build's lock handle has the releasing write (`lock.unlockWith(ops)`). */
export const HAS_UNLOCK_WITH = typeof Lock.prototype.unlockWith === "function";

/** The rows, in print order: what each measures and its physical floor in round trips. */
export const WARM_ROWS = [
  { row: "withLock", what: "warm withLock (lock, release)", floor: 2 },
  { row: "raw", what: "  raw lock + release txns, same fetch", floor: 2 },
  { row: "write", what: "warm locked write (lock, fenced put, release)", floor: 3 },
  { row: "releasing", what: "warm locked write, the put releasing (unlockWith)", floor: 2 },
  { row: "handedOff", what: "warm withLock, release handed to waitUntil", floor: 1 },
];

export const ETCD3_ROWS = [
  { row: "etcd3Lock", what: "etcd3 lock().do() (grant, put, revoke)", floor: 2 },
  { row: "etcd3Write", what: "etcd3 lock + put + unlock", floor: 3 },
];

/**
 * Contenders against `url`, named `<row>-<kind>` (`<row>` for etcd3). `cleanup` collects what to close.
 * A handed-off call records whether withLock called waitUntil (`handedOff`).
 */
export async function warmContenders(url, run, cleanup) {
  const contenders = [];
  for (const kind of FETCH_KINDS) {
    const fetch = openFetch(kind);
    cleanup.push(() => fetch.close());
    const counter = countingFetch(fetch.sdk);
    const etcd = new Etcd({ endpoints: [url], fetch: counter });
    cleanup.push(() => bounded(etcd.close(), 3_000));
    const name = (row) => `${run}/${row}-${kind}`;
    const add = (row, call, extra = {}) => contenders.push({ name: `${row}-${kind}`, counter, call, ...extra });

    add("withLock", () => etcd.withLock(name("withLock"), noop));

    const lease = await grantRawLease(fetch.send, url, 60);
    cleanup.push(() => revokeRawLease(fetch.send, url, lease));
    // Through the counter, as the SDK's requests: the global fetch when fetch.sdk is undefined.
    const raw = rawMutex(counter, url, name("raw"), lease);
    add("raw", async () => raw.unlock(await raw.lock()));

    const key = `${run}/data-${kind}`;
    add("write", () =>
      etcd.withLock(name("write"), (lock) => etcd.txn().if(lock.ifHeld()).then(op.put(key, "v")).commit()),
    );

    if (HAS_UNLOCK_WITH)
      add("releasing", () => etcd.withLock(name("releasing"), (lock) => lock.unlockWith([op.put(key, "v")])));

    const pending = [];
    const handedOff = { calls: 0 };
    add(
      "handedOff",
      () =>
        etcd.withLock(name("handedOff"), noop, {
          waitUntil: (promise) => {
            handedOff.calls++;
            pending.push(promise);
          },
        }),
      { after: () => Promise.allSettled(pending.splice(0)), handedOff },
    );
  }
  const client = new Etcd3({ hosts: url });
  cleanup.push(() => client.close());
  contenders.push({ name: "etcd3Lock", call: () => client.lock(`${run}/etcd3Lock`).do(noop) });
  contenders.push({
    name: "etcd3Write",
    call: async () => {
      const lock = await client.lock(`${run}/etcd3Write`).acquire();
      try {
        await client.put(`${run}/data-etcd3`).value("v");
      } finally {
        await lock.release();
      }
    },
  });
  return contenders;
}

/** One call of `contender`: its user-visible ms, and the requests it sent in all (etcd-edge only). */
export async function timeCall(contender) {
  contender.counter?.reset();
  const start = performance.now();
  await contender.call();
  const ms = performance.now() - start;
  await contender.after?.();
  return { ms, requests: contender.counter?.total() };
}
