// One process of the fence control (control.ts), on the built package. Its role, from the JSON in argv:
// - "setup": makes the store's counter (0) and fence table; "read": prints the counter.
// - "worker": `increments` times, under the lock: reads the counter, writes it plus one (fenced or not), and says
//   so once the store acknowledged it. A call that fails (etcd behind faults in `npm run chaos`) is tried again;
//   an increment acknowledged before its release failed counts.
// - "victim": takes the lock on a short lease, reads the counter, prints it, and waits for a line on stdin: the test
//   freezes it there (SIGSTOP) past its lease, lets others take the lock, resumes it, and it writes what it read plus
//   one, as a holder that still believes it holds.
// Each prints one JSON line per event on stdout.
import { createInterface } from "node:readline";
import { Etcd } from "../../dist/index.js";
import { adapters } from "./adapters.mjs";

const config = JSON.parse(process.argv[2]);
const say = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
const store = await adapters[config.store](config.conn, config.resource);
const etcd = new Etcd({ endpoints: config.etcd });

try {
  if (config.role === "setup") {
    await store.setup();
    say({ event: "ready" });
  } else if (config.role === "read") {
    say({ event: "value", value: await store.read() });
  } else if (config.role === "worker") {
    let done = 0;
    for (let tries = 0; done < config.increments && tries < 10 * config.increments; tries++) {
      try {
        await etcd.withLock(
          config.name,
          async (lock) => {
            await store.write((await store.read()) + 1, lock.revision, config.fenced);
            done++;
            say({ event: "incremented", token: lock.revision });
          },
          { timeout: 30_000 },
        );
      } catch (error) {
        say({ event: "failed", code: error.code, message: error.message });
      }
    }
    say({ event: "done", increments: done });
  } else if (config.role === "victim") {
    // Its 2 s lease may run out before the lock is taken when etcd is slow (behind faults in `npm run chaos`):
    // the session then says so, and the victim tries again with a new one.
    let session;
    let lock;
    for (let tries = 1; lock === undefined; tries++) {
      try {
        session = await etcd.session({ ttl: 2 });
        lock = await session.mutex(config.name).lock({ timeout: 30_000 });
      } catch (error) {
        await session?.close().catch(() => {});
        if (tries === 10) throw error;
        say({ event: "failed", code: error.code, message: error.message });
      }
    }
    const value = await store.read();
    say({ event: "read", value, token: lock.revision });
    await new Promise((resolve) => createInterface({ input: process.stdin }).once("line", resolve));
    // A connection to the store kept alive while it was frozen may be gone (a server closed it meanwhile): a write
    // that failed without an answer (no code: not the fence's refusal) is sent again, as a user's retry would be.
    // The same value either way, and a fenced write is conditional: a second send changes nothing more.
    for (let tries = 1; ; tries++) {
      try {
        await store.write(value + 1, lock.revision, config.fenced);
        say({ event: "wrote", value: value + 1 });
        break;
      } catch (error) {
        if (error.code === undefined && tries < 3) continue;
        say({ event: "refused", code: error.code, message: error.message });
        break;
      }
    }
    await session.close().catch(() => {});
  }
} finally {
  await store.close();
  await etcd.close();
}
process.exit(0);
