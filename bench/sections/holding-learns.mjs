// §8 A holding that learns at once: in a session with keepAlive "auto", a lock held for more than a second
// follows its key on its line's watch, and its operator records on the client's requests stream. Another client
// deletes the key, revokes the session's lease, revokes the lock (`operator.revokeLock`) or asks for its
// release (`operator.requestRelease`); the figure is the time from that call's start to the holding's `signal`
// aborting (held false, LOCK_LOST with the cause) or, for a request, its `releaseRequested` aborting, on loopback.
import { Etcd } from "etcd-edge";
import { EtcdOperator } from "etcd-edge/operate";
import { fmt, median, quantile } from "../lib/stats.mjs";
import { meets } from "../lib/summary.mjs";
import { printTable } from "../lib/table.mjs";

/** Holdings per round; each lives past the follow delay before it is taken from outside. */
const PER_ROUND = 20;
const HELD_FOR_MS = 1_300;

export async function holdingLearns({ endpoint, options, summary, run }) {
  const rounds = Math.max(1, Math.round(options.tpRounds * 2));
  console.log(
    `8. a holding learns of an outside delete or revocation (keepAlive "auto", held > 1 s): ${rounds} rounds of ` +
      `${PER_ROUND} holdings each; ms from the outside request's send to the holding's signal`,
  );
  const etcd = new Etcd({ endpoints: endpoint });
  const outside = new EtcdOperator({ endpoints: endpoint });
  const samples = { delete: [], revoke: [], revokeLock: [], requestRelease: [] };
  try {
    for (let round = 0; round < rounds; round++) {
      for (const how of Object.keys(samples)) {
        const sessions = await Promise.all(Array.from({ length: PER_ROUND }, () => etcd.session({ ttl: 60 })));
        const locks = await Promise.all(sessions.map((s, i) => s.mutex(`${run}/${round}/${how}/${i}`).lock()));
        await new Promise((resolve) => setTimeout(resolve, HELD_FOR_MS));
        for (const [i, lock] of locks.entries()) {
          const signal = how === "requestRelease" ? lock.releaseRequested : lock.signal;
          const learned = new Promise((resolve) => signal.addEventListener("abort", () => resolve(performance.now())));
          const sentAt = performance.now();
          if (how === "delete") await outside.delete(lock.key);
          else if (how === "revoke") await outside.lease.revoke(sessions[i].leaseId);
          else if (how === "revokeLock") await outside.revokeLock(lock.name, { reason: "bench" });
          else await outside.requestRelease(lock.name, { reason: "bench" });
          samples[how].push((await learned) - sentAt);
        }
        await Promise.all(sessions.map((s) => s.close().catch(() => {})));
      }
    }
  } finally {
    await etcd.close();
  }
  const said = {
    delete: "its key deleted by another client",
    revoke: "its lease revoked",
    revokeLock: "operator.revokeLock (held false, LOCK_LOST)",
    requestRelease: "operator.requestRelease (releaseRequested)",
  };
  const rows = Object.entries(samples).map(([how, ms]) => [
    said[how],
    ms.length,
    fmt(median(ms), 1),
    fmt(quantile(ms, 0.99), 1),
    fmt(Math.max(...ms), 1),
  ]);
  printTable(["outside", "n", "median ms", "p99 ms", "max ms"], rows, { indent: "   ", align: "lrrrr" });
  for (const [how, ms] of Object.entries(samples)) {
    const p99 = quantile(ms, 0.99);
    summary.add(8, `a holding learns of ${said[how]}, p99`, `${fmt(p99, 1)} ms`, "≤ 100 ms", meets(p99, "<=", 100));
  }
  console.log("");
}
