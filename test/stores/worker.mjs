// One process of the fence control (fence-control.test.ts), on the built package. Its role, from the JSON in argv:
// - "setup": makes the store's counter (0) and fence table; "read": prints the counter.
// - "worker": `increments` times, under the lock: reads the counter, writes it plus one (fenced or not).
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
const etcd = new Etcd({ endpoints: [config.etcd] });

try {
  if (config.role === "setup") {
    await store.setup();
    say({ event: "ready" });
  } else if (config.role === "read") {
    say({ event: "value", value: await store.read() });
  } else if (config.role === "worker") {
    for (let i = 0; i < config.increments; i++) {
      await etcd.withLock(
        config.name,
        async (lock) => store.write((await store.read()) + 1, lock.revision, config.fenced),
        { timeout: 30_000 },
      );
    }
    say({ event: "done", increments: config.increments });
  } else if (config.role === "victim") {
    const session = await etcd.session({ ttl: 2 });
    const lock = await session.mutex(config.name).lock({ timeout: 30_000 });
    const value = await store.read();
    say({ event: "read", value, token: lock.revision });
    await new Promise((resolve) => createInterface({ input: process.stdin }).once("line", resolve));
    try {
      await store.write(value + 1, lock.revision, config.fenced);
      say({ event: "wrote", value: value + 1 });
    } catch (error) {
      say({ event: "refused", code: error.code, message: error.message });
    }
    await session.close().catch(() => {});
  }
} finally {
  await store.close();
  await etcd.close();
}
process.exit(0);
