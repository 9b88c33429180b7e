// §10 Lock-delay after an unclean loss (`lockDelay`): two clients hand one name back and forth with `withLock`,
// 1,000 clean handoffs in all (each caller's release is clean), with a 5 s lockDelay: the handoffs delayed (target
// 0) and the handoff's median with lockDelay ÷ without (its two reads). Then unclean handoffs: a holder's lease is
// revoked (as a crash's expiry ends it) with a waiter behind it; the time from the revocation to the waiter's
// holding, every one at least lockDelay (1 s here).
import { Etcd } from "etcd-edge";
import { EtcdOperator } from "etcd-edge/operate";
import { fmt, median, quantile } from "../lib/stats.mjs";
import { meets } from "../lib/summary.mjs";
import { printTable } from "../lib/table.mjs";

const CLEAN_HANDOFFS = 1_000;
const UNCLEAN_HANDOFFS = 10;
const UNCLEAN_DELAY_MS = 1_000;

export async function lockDelay({ endpoint, summary, run }) {
  console.log(
    `10. lockDelay: ${CLEAN_HANDOFFS} clean handoffs between two clients (delayed: target 0), then ` +
      `${UNCLEAN_HANDOFFS} unclean ones (a holder's lease revoked; ms until the waiter holds, target ≥ lockDelay)`,
  );
  const clean = { on: await handoffs(endpoint, `${run}/on`, 5_000), off: await handoffs(endpoint, `${run}/off`, 0) };
  const unclean = await uncleanHandoffs(endpoint, `${run}/unclean`);
  printTable(
    ["handoffs", "n", "delayed", "median ms", "p99 ms"],
    [
      [
        "clean, lockDelay 5 s",
        clean.on.ms.length,
        clean.on.delayed,
        fmt(median(clean.on.ms), 2),
        fmt(quantile(clean.on.ms, 0.99), 2),
      ],
      [
        "clean, no lockDelay",
        clean.off.ms.length,
        clean.off.delayed,
        fmt(median(clean.off.ms), 2),
        fmt(quantile(clean.off.ms, 0.99), 2),
      ],
      [
        `unclean, lockDelay ${UNCLEAN_DELAY_MS / 1000} s`,
        unclean.length,
        unclean.length,
        fmt(median(unclean), 1),
        fmt(Math.max(...unclean), 1),
      ],
    ],
    { indent: "   ", align: "lrrrr" },
  );
  summary.add(
    10,
    `clean handoffs delayed (of ${CLEAN_HANDOFFS}, lockDelay 5 s)`,
    String(clean.on.delayed),
    "0",
    clean.on.delayed === 0,
  );
  const cost = median(clean.on.ms) / median(clean.off.ms);
  summary.add(10, "clean handoff with lockDelay ÷ without (median)", `${fmt(cost, 2)}×`, "two reads", true);
  const shortest = Math.min(...unclean);
  summary.add(
    10,
    "unclean handoff, shortest wait",
    `${fmt(shortest, 0)} ms`,
    `≥ ${UNCLEAN_DELAY_MS} ms`,
    meets(shortest, ">=", UNCLEAN_DELAY_MS),
  );
  console.log("");
}

/** Two clients take `name` in turn with withLock, CLEAN_HANDOFFS handoffs in all: each one's ms, and the delayed. */
async function handoffs(endpoint, name, lockDelayMs) {
  let delayed = 0;
  const onEvent = (event) => {
    if (event.type === "lock.delayed") delayed++;
  };
  const clients = [0, 1].map(() => new Etcd({ endpoints: endpoint, lockDelay: lockDelayMs, onEvent }));
  const ms = [];
  let releasedAt;
  try {
    const worker = async (client) => {
      for (let i = 0; i < CLEAN_HANDOFFS / 2; i++) {
        await client.withLock(name, async () => {
          if (releasedAt !== undefined) ms.push(performance.now() - releasedAt);
          await new Promise((resolve) => setTimeout(resolve, 1));
          releasedAt = performance.now();
        });
      }
    };
    await Promise.all(clients.map(worker));
  } finally {
    await Promise.all(clients.map((client) => client.close()));
  }
  return { ms, delayed };
}

/** A waiter behind a holder whose lease is revoked: ms from the revocation to the waiter's holding. */
async function uncleanHandoffs(endpoint, prefix) {
  const etcd = new EtcdOperator({ endpoints: endpoint });
  const waits = [];
  try {
    for (let i = 0; i < UNCLEAN_HANDOFFS; i++) {
      const name = `${prefix}/${i}`;
      const holder = await etcd.session({ ttl: 30 });
      const waiter = await etcd.session({ ttl: 30 });
      await holder.mutex(name).lock();
      const waiting = waiter.mutex(name).lock({ lockDelay: UNCLEAN_DELAY_MS, timeout: 20_000 });
      while ((await etcd.inspectLock(name)).waiters.length === 0) await new Promise((r) => setTimeout(r, 10));
      const revokedAt = performance.now();
      await etcd.lease.revoke(holder.leaseId);
      const lock = await waiting;
      waits.push(performance.now() - revokedAt);
      await lock.unlock();
      await waiter.close();
    }
  } finally {
    await etcd.close();
  }
  return waits;
}
