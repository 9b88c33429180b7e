// Two processes contending for one name (handoff-peer.mjs each): one holds, the other waits in line, and
// the holder lets go. The handoff's latency runs from the holder's unlock() call to the waiter's lock()
// resolving, on the wall clock both processes share.
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { sleep } from "./bounded.mjs";

const PEER = fileURLToPath(new URL("./handoff-peer.mjs", import.meta.url));
const STEP_MS = 30_000;

class Peer {
  #child;
  #waiters = [];

  constructor(endpoint, kind) {
    this.#child = fork(PEER, [endpoint, kind], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    this.#child.on("message", (message) => {
      const i = this.#waiters.findIndex((w) => message.error !== undefined || w.key in message);
      if (i < 0) return;
      const [waiter] = this.#waiters.splice(i, 1);
      if (message.error !== undefined) waiter.reject(new Error(`handoff peer: ${message.error}`));
      else waiter.resolve(message[waiter.key]);
    });
    this.#child.on("exit", (code) => {
      for (const w of this.#waiters.splice(0)) w.reject(new Error(`handoff peer exited (${code})`));
    });
  }

  /** The next message carrying `key`, within STEP_MS. */
  next(key) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`handoff peer: no "${key}" within ${STEP_MS} ms`)), STEP_MS);
      const settle = (f) => (value) => {
        clearTimeout(timer);
        f(value);
      };
      this.#waiters.push({ key, resolve: settle(resolve), reject: settle(reject) });
    });
  }

  send(message) {
    this.#child.send(message);
  }

  async exit() {
    if (this.#child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.#child.once("exit", resolve));
    this.send({ cmd: "exit" });
    await Promise.race([exited, sleep(3_000)]);
    this.#child.kill();
  }
}

/** Two peers on `kind` fetch against `endpoint`; `handoff(name)` measures one handoff, in ms. */
export async function openHandoffPair(endpoint, kind, { settleMs }) {
  const peers = [new Peer(endpoint, kind), new Peer(endpoint, kind)];
  await Promise.all(peers.map((p) => p.next("ready")));
  let turn = 0;
  return {
    async handoff(name) {
      // The sides take turns holding, so both learn of a handoff as often.
      const [holder, waiter] = turn++ % 2 === 0 ? peers : [peers[1], peers[0]];
      const held = holder.next("held");
      holder.send({ cmd: "lock", name });
      await held;
      const waiting = waiter.next("waiting");
      const acquired = waiter.next("held");
      waiter.send({ cmd: "lock", name });
      await waiting;
      // Past the join, the waiter still opens its watch on the line: let it settle, as a real waiter had.
      await sleep(settleMs);
      const released = holder.next("released");
      holder.send({ cmd: "unlock" });
      const latency = (await acquired) - (await released);
      const done = waiter.next("released");
      waiter.send({ cmd: "unlock" });
      await done;
      return latency;
    },
    close: () => Promise.all(peers.map((p) => p.exit())),
  };
}
