// One side of a contended handoff between two processes (the round-trip section forks two of these):
//   fork("bench/lib/handoff-peer.mjs", [endpoint, "global" | "node"])
// A session of its own; the parent drives it by IPC messages:
//   { cmd: "lock", name }  → { waiting: true } once its join found the name held, then { held: at }
//   { cmd: "unlock" }      → { released: at }, `at` taken right before unlock() is called
//   { cmd: "exit" }        → closes its session and exits
// Times are wall-clock ms (timeOrigin + now), comparable across processes on one machine.
import { Etcd } from "etcd-edge";
import { openFetch } from "./fetches.mjs";

const [endpoint, kind] = process.argv.slice(2);
const wallNow = () => performance.timeOrigin + performance.now();
const fetch = openFetch(kind);
const etcd = new Etcd({
  endpoints: [endpoint],
  fetch: fetch.sdk,
  onEvent: (event) => {
    if (event.type === "lock.waiting") process.send({ waiting: true });
  },
});
const session = await etcd.session({ ttl: 30 });
let lock;

process.on("message", async (message) => {
  try {
    if (message.cmd === "lock") {
      lock = await session.mutex(message.name).lock({ timeout: 30_000 });
      process.send({ held: wallNow() });
    } else if (message.cmd === "unlock") {
      const at = wallNow();
      await lock.unlock();
      process.send({ released: at });
    } else if (message.cmd === "exit") {
      await session.close().catch(() => {});
      await fetch.close();
      process.exit(0);
    }
  } catch (error) {
    process.send({ error: `${error.code ?? ""} ${error.message}` });
  }
});
process.send({ ready: true });
