// One direction of a relayed TCP connection, optionally late: the fault relay (fault-proxy.ts) and the
// plain relay (tcp-proxy.ts, which the bench's delay relay wraps) share it.
import type { Socket } from "node:net";

/** Where a pipe reads its one-way delay, in ms, at each chunk (0: none). */
export interface DelaySource {
  latency(): number;
  /** Told, for each delayed chunk it sends, how many ms past its due time that was (the timer's lateness). */
  late?(ms: number): void;
}

// A latency queue past this many bytes stops reading its source until it drains: bounded memory.
const MAX_QUEUED_BYTES = 1024 * 1024;

/**
 * One direction of a link: writes in order, optionally late (latency), never faster than the reader takes
 * them (backpressure pauses the source), and not at all while held. Each chunk waits in a FIFO until its
 * own due time (arrival + latency), so a delay neither reorders bytes nor holds one past its due time but for
 * the lateness of its timer.
 */
export class DelayPipe {
  readonly #from: Socket;
  readonly #to: Socket;
  readonly #delay: DelaySource;
  readonly #queue: Array<{ due: number; bytes: Buffer }> = [];
  #queued = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #held = false;
  #ending = false;
  #discarded = false;
  /** Why the source is paused; it reads again only when none is left. */
  readonly #pausedFor = new Set<"hold" | "backpressure" | "queue">();

  constructor(from: Socket, to: Socket, delay: DelaySource) {
    this.#from = from;
    this.#to = to;
    this.#delay = delay;
    to.on("drain", () => this.#unpause("backpressure"));
  }

  write(bytes: Buffer): void {
    if (this.#discarded) return;
    const latency = this.#delay.latency();
    if (latency === 0 && this.#queue.length === 0 && !this.#held) return this.#send(bytes);
    this.#queue.push({ due: performance.now() + latency, bytes });
    this.#queued += bytes.length;
    if (this.#queued > MAX_QUEUED_BYTES) this.#pause("queue");
    this.#drain();
  }

  /** Half-closes the destination once everything queued has gone. */
  end(): void {
    this.#ending = true;
    this.#drain();
  }

  hold(): void {
    this.#held = true;
    clearTimeout(this.#timer);
    this.#pause("hold");
  }

  unhold(): void {
    this.#held = false;
    this.#unpause("hold");
    this.#drain();
  }

  discard(): void {
    this.#discarded = true;
    this.#queue.length = 0;
    this.#queued = 0;
    clearTimeout(this.#timer);
    // Keep reading (and dropping) so the client's own close is still noticed.
    this.#pausedFor.clear();
    this.#from.resume();
  }

  #drain(): void {
    if (this.#held || this.#discarded) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const now = performance.now();
    while (this.#queue.length > 0 && this.#queue[0]!.due <= now) {
      const { bytes, due } = this.#queue.shift()!;
      this.#delay.late?.(now - due);
      this.#queued -= bytes.length;
      this.#send(bytes);
    }
    if (this.#queued <= MAX_QUEUED_BYTES) this.#unpause("queue");
    if (this.#queue.length > 0) {
      this.#timer = setTimeout(() => this.#drain(), Math.max(0, this.#queue[0]!.due - now));
    } else if (this.#ending && !this.#to.destroyed) {
      this.#to.end();
    }
  }

  #send(bytes: Buffer): void {
    if (this.#to.destroyed) return;
    if (!this.#to.write(bytes)) this.#pause("backpressure");
  }

  #pause(reason: "hold" | "backpressure" | "queue"): void {
    this.#pausedFor.add(reason);
    this.#from.pause();
  }

  #unpause(reason: "hold" | "backpressure" | "queue"): void {
    if (!this.#pausedFor.delete(reason) || this.#pausedFor.size > 0 || this.#discarded) return;
    this.#from.resume();
  }
}
