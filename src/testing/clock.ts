/**
 * The member's time, in ms. "virtual" stands still until the test calls advance(); "wall" follows the monotonic
 * clock (plus whatever advance() added), for clients the test does not drive: another process, another language.
 */
export type ClockMode = "virtual" | "wall";

export interface Clock {
  readonly mode: ClockMode;
  now(): number;
  /** Moves time forward by `ms` (on a wall clock: skips ahead). */
  skip(ms: number): void;
  /**
   * Calls `fire` at (or soon after) `at` on a wall clock; a virtual clock never fires by itself. One alarm at a
   * time: a new one replaces the old. The timer never keeps a Node process alive.
   */
  alarm(at: number | undefined, fire: () => void): void;
  /** Cancels the alarm. */
  stop(): void;
}

export function createClock(mode: ClockMode): Clock {
  return mode === "wall" ? new WallClock() : new VirtualClock();
}

class VirtualClock implements Clock {
  readonly mode = "virtual";
  private t = 0;

  now(): number {
    return this.t;
  }

  skip(ms: number): void {
    this.t += Math.max(0, ms);
  }

  alarm(): void {}

  stop(): void {}
}

/** setTimeout's limit; a later alarm is re-armed when this one fires. */
export const MAX_DELAY_MS = 2 ** 31 - 1;

class WallClock implements Clock {
  readonly mode = "wall";
  private readonly origin = performance.now();
  private offset = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  now(): number {
    return performance.now() - this.origin + this.offset;
  }

  skip(ms: number): void {
    this.offset += Math.max(0, ms);
  }

  alarm(at: number | undefined, fire: () => void): void {
    this.stop();
    if (at === undefined) return;
    const delay = Math.min(MAX_DELAY_MS, Math.max(0, Math.ceil(at - this.now())));
    this.timer = setTimeout(() => {
      this.timer = undefined;
      fire();
    }, delay);
    // Node and Bun: never keep the process alive for a lease timer. Other runtimes have no unref.
    (this.timer as { unref?: () => void }).unref?.();
  }

  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
