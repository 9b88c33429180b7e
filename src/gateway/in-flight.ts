import { aborted } from "../errors/catalogue.js";
import { queueUp } from "./signals.js";

/**
 * At most `limit` requests of one client on the wire at a time; the others wait here, in order. A request
 * waiting inside a fetch implementation's own pool runs out its attempt's time and, when retried, adds a
 * second copy to the same queue (undici keeps a queued request even after its signal aborts): under a
 * thousand waiters that is a retry storm. Waiting here costs no attempt's time, and an abort takes effect at
 * once.
 */
export class InFlight {
  readonly #limit: number;
  #active = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(limit: number) {
    this.#limit = limit;
  }

  /** Takes a place if one is free now (give it back with `leave()`). */
  tryEnter(): boolean {
    if (this.#active >= this.#limit || this.#waiting.length > 0) return false;
    this.#active++;
    return true;
  }

  /** Waits for a place (give it back with `leave()`). Rejects when `signal` aborts first. */
  async enter(signal: AbortSignal | undefined): Promise<void> {
    if (this.tryEnter()) return;
    await queueUp(this.#waiting, signal).catch((reason: unknown) => {
      throw aborted(reason);
    });
  }

  /**
   * Gives a place back: to the next waiting call if any (which then has it), else to the pool.
   * Once per place taken.
   */
  leave(): void {
    const next = this.#waiting.shift();
    if (next !== undefined) next();
    else this.#active--;
  }
}
