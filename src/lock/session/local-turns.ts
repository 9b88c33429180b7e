import { queueUp } from "../../gateway/signals.js";

/**
 * Turns per key among the callers of one process. etcd sees a single key per session and name
 * (`<name>/<leaseHex>`), so two callers of one session contending for one name must take turns here
 * before either joins etcd's line. Every lock takes a turn, and nearly always nobody else wants it, so a
 * turn taken at once costs a map entry and no promise.
 */
export class LocalTurns {
  /** The keys whose turn is taken, each with the callers waiting for it, in order. */
  readonly #waiting = new Map<string, Array<() => void>>();

  /** Waits for the turn on `key`; resolves with the function that hands it on. */
  async take(key: string, signal: AbortSignal): Promise<() => void> {
    const queue = this.#waiting.get(key);
    if (queue === undefined) return this.#took(key);
    await queueUp(queue, signal);
    return this.#handOn(key);
  }

  /** The turn on `key` if nobody has it, else undefined. */
  tryTake(key: string): (() => void) | undefined {
    return this.#waiting.has(key) ? undefined : this.#took(key);
  }

  #took(key: string): () => void {
    this.#waiting.set(key, []);
    return this.#handOn(key);
  }

  /** Hands the turn on `key` to the next caller waiting for it, once; with none, the key is free. */
  #handOn(key: string): () => void {
    let handed = false;
    return () => {
      if (handed) return;
      handed = true;
      const queue = this.#waiting.get(key);
      const next = queue?.shift();
      if (next !== undefined) next();
      else this.#waiting.delete(key);
    };
  }
}
