// One run on a hot name: W contenders in this process loop acquire → hold → release until a deadline,
// each call bounded (a contender whose call outlives its bound stops: its state is unknown). The same
// loop drives etcd-edge (a session per contender) and etcd3 (its lock retried), recorded in a HandoffLog.
import { Etcd } from "etcd-edge";
import { Etcd3 } from "etcd3";
import { bounded, sleep } from "./bounded.mjs";
import { etcd3LockRetrying } from "./etcd3-lock.mjs";
import { countingFetch, openFetch } from "./fetches.mjs";
import { HandoffLog } from "./handoff-log.mjs";

/** How long past its own timeout a call may take before the bench stops waiting and counts it HUNG. */
const GRACE_MS = 1_000;
/** A call that settles this long after its timeout is late: its timeout did not hold. */
const LATE_MS = 250;

/**
 * etcd-edge on `kind` fetch: a fresh client and pool per run, so a pool wedged by one run cannot slow the
 * next. Returns handoffs/s within the window, the log, late calls, and the requests sent by path. `sdk`: the
 * build whose `Etcd` runs (bench/ab.mjs passes another build's; the HTTP client stays this repository's).
 * `fetchOptions`: createNodeFetch's (a CA for an https endpoint).
 */
export async function hotNameEdge({
  endpoint,
  kind,
  fetchOptions,
  workers,
  seconds,
  name,
  timeout,
  holdMs,
  sdk = { Etcd },
}) {
  const fetch = openFetch(kind, fetchOptions);
  const counter = countingFetch(fetch.sdk);
  const etcd = new sdk.Etcd({ endpoints: [endpoint], fetch: counter });
  const log = new HandoffLog();
  const opened = await Promise.all(
    Array.from({ length: workers }, () => bounded(etcd.session({ ttl: 10, timeout }), timeout + GRACE_MS)),
  );
  const sessions = opened.filter((o) => o.ok).map((o) => o.value);
  for (const o of opened) if (!o.ok) log.failures.add(`session ${o.code}`);
  counter.reset();
  const result = await loop(
    sessions.map((s) => s.mutex(name)),
    seconds,
    log,
    timeout,
    holdMs,
    {
      acquire: (mutex) => mutex.lock({ timeout }),
      order: (lock) => lock.revision,
      release: (lock) => lock.unlock({ timeout }),
    },
  );
  const requests = new Map(counter.counts);
  await Promise.all(sessions.map((s) => bounded(s.close({ timeout: 2_000 }), 4_000)));
  await fetch.close();
  return { ...result, requests };
}

/** etcd3's lock retried with backoff (no line to keep: its order is when each contender started trying). */
export async function hotNameEtcd3({ endpoint, workers, seconds, name, timeout, holdMs }) {
  const client = new Etcd3({ hosts: endpoint });
  try {
    return await loop(Array(workers).fill(name), seconds, new HandoffLog(), timeout, holdMs, {
      acquire: (lockName) => etcd3LockRetrying(client, lockName, { ttl: 10, timeout }),
      order: (_, calledAt) => calledAt,
      release: (lock) => lock.release(),
    });
  } finally {
    client.close();
  }
}

async function loop(contenders, seconds, log, timeout, holdMs, { acquire, order, release }) {
  const bound = timeout + GRACE_MS;
  let late = 0;
  const settled = (result, what) => {
    if (result.ms > timeout + LATE_MS) late++;
    if (!result.ok) log.failures.add(`${what} ${result.code}`);
    return result;
  };
  const deadline = performance.now() + seconds * 1000;
  await Promise.all(
    contenders.map(async (contender) => {
      while (performance.now() < deadline) {
        const calledAt = performance.now();
        // A lock that arrives after the bench gave up on it is released at once, so it blocks nobody.
        const got = settled(await bounded(acquire(contender), bound, (held) => release(held).catch(() => {})), "lock");
        if (got.hung) return;
        if (!got.ok) continue;
        log.acquired(calledAt, order(got.value, calledAt));
        await sleep(holdMs);
        log.releasing();
        if (settled(await bounded(release(got.value), bound), "unlock").hung) return;
      }
    }),
  );
  return { rate: log.countBefore(deadline) / seconds, log, late };
}
