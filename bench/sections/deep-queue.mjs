// §5 A deep queue: N waiters (a session each, all in this process) call lock() on one name at once; each
// holds for a macrotask and unlocks. Run once with the global fetch and once with createNodeFetch() at its
// defaults. Reports the time to drain, how many acquired, how many failed and with what code, and how
// many calls settled later than their own timeout (or never, within the bench's bound).
import { Etcd } from "etcd-edge";
import { bounded, sleep, Tally } from "../lib/bounded.mjs";
import { EDGE_LABEL, FETCH_LABEL, openFetch } from "../lib/fetches.mjs";
import { fmt } from "../lib/stats.mjs";
import { printTable } from "../lib/table.mjs";

const GRACE_MS = 2_000;
const LATE_MS = 250;
const CALL_TIMEOUT_MS = 10_000;

export async function deepQueue({ endpoint, options, summary, run }) {
  const n = options.waiters;
  console.log(
    `5. deep queue: ${n} waiters on one name in one process (lock() timeout ${options.deepTimeout} ms; ` +
      `other calls ${CALL_TIMEOUT_MS} ms)`,
  );
  const rows = [];
  for (const kind of ["global", "node"]) {
    const result = await drain(endpoint, kind, n, `${run}/${kind}`, options.deepTimeout);
    rows.push([
      EDGE_LABEL[kind],
      `${fmt(result.drainMs / 1000, 1)} s`,
      `${result.acquired}/${n}`,
      result.failures.toString(),
      `${result.late} late, ${result.hung} hung`,
      `${fmt(result.setupMs / 1000, 1)} s, ${fmt(result.closeMs / 1000, 1)} s`,
    ]);
    const pass = result.acquired === n && result.failures.total === 0 && result.late === 0 && result.hung === 0;
    summary.add(
      5,
      `${n} waiters drain, ${FETCH_LABEL[kind]}`,
      `${result.acquired}/${n} in ${fmt(result.drainMs / 1000, 1)} s, ${result.late + result.hung} overran`,
      `all, none overran`,
      pass,
    );
  }
  printTable(
    ["fetch", "drained in", "acquired", "failed (code count)", "timeouts that did not hold", "sessions open, close"],
    rows,
    { align: "lrrlll" },
  );
  console.log("");
}

async function drain(endpoint, kind, n, name, lockTimeout) {
  const fetch = openFetch(kind);
  const etcd = new Etcd({ endpoints: [endpoint], fetch: fetch.sdk });
  const failures = new Tally();
  let late = 0;
  let hung = 0;
  const count = (result, timeout, what) => {
    if (result.hung) hung++;
    else if (result.ms > timeout + LATE_MS) late++;
    if (!result.ok) failures.add(`${what} ${result.code}`);
    return result.ok;
  };

  const setupStart = performance.now();
  const opened = await Promise.all(
    Array.from({ length: n }, () =>
      bounded(etcd.session({ ttl: 30, timeout: CALL_TIMEOUT_MS }), CALL_TIMEOUT_MS + GRACE_MS),
    ),
  );
  const sessions = opened.filter((o) => count(o, CALL_TIMEOUT_MS, "session")).map((o) => o.value);
  const setupMs = performance.now() - setupStart;

  let acquired = 0;
  const start = performance.now();
  await Promise.all(
    sessions.map(async (session) => {
      const got = await bounded(session.mutex(name).lock({ timeout: lockTimeout }), lockTimeout + GRACE_MS, (lock) =>
        lock.unlock().catch(() => {}),
      );
      if (!count(got, lockTimeout, "lock")) return;
      acquired++;
      await sleep(0);
      count(
        await bounded(got.value.unlock({ timeout: CALL_TIMEOUT_MS }), CALL_TIMEOUT_MS + GRACE_MS),
        CALL_TIMEOUT_MS,
        "unlock",
      );
    }),
  );
  const drainMs = performance.now() - start;

  const closeStart = performance.now();
  await Promise.all(sessions.map((s) => bounded(s.close({ timeout: CALL_TIMEOUT_MS }), CALL_TIMEOUT_MS + GRACE_MS)));
  const closeMs = performance.now() - closeStart;
  await fetch.close();
  return { acquired, failures, late, hung, drainMs, setupMs, closeMs };
}
