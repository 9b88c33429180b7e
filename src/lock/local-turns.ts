import { untilAborted } from "../gateway/signals.js";

/**
 * Turns per key among the callers of one process. etcd sees a single key per session and name
 * (`<name>/<leaseHex>`), so two callers of one session contending for one name must take turns here
 * before either joins etcd's line.
 */
export class LocalTurns {
  readonly #turns = new Map<string, Promise<void>>();

  /** Waits for the turn on `key`; resolves with the function that hands it on. */
  async take(key: string, signal: AbortSignal): Promise<() => void> {
    const previous = this.#turns.get(key);
    const release = this.#enqueue(key, previous);
    if (previous === undefined) return release;
    try {
      await untilAborted(previous, signal);
      return release;
    } catch (error) {
      release();
      throw error;
    }
  }

  /** The turn on `key` if nobody has it, else undefined. */
  tryTake(key: string): (() => void) | undefined {
    return this.#turns.has(key) ? undefined : this.#enqueue(key, undefined);
  }

  #enqueue(key: string, previous: Promise<void> | undefined): () => void {
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const turn = previous === undefined ? mine : previous.then(() => mine);
    this.#turns.set(key, turn);
    // The entry goes only when every turn before and including this one is over.
    void turn.then(() => {
      if (this.#turns.get(key) === turn) this.#turns.delete(key);
    });
    return release;
  }
}
