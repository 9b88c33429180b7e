/**
 * The sends of one release (a lock key's guarded delete, a lease's revocation), to decide its outcome from
 * what the server shows when an answer was lost and the release was sent again.
 *
 * A release is resent until answered, and a repeat is a no-op. So a later send may find the key (or lease)
 * already gone. If an earlier send left while the lease was still within its deadline, that is success:
 * either the earlier send did it and its answer was lost, or the lease ended after that send, that is after
 * the work under the lock was done. Both mean the work was protected to the end. Only when the first send
 * already finds it gone was the lock lost before the release (the lease had ended under the work).
 */
export class ReleaseSends {
  /** The lease's holder, which tells whether its deadline has not passed yet. */
  readonly #lease: { beforeDeadline(): boolean };
  #withinDeadline = 0;
  #earlierWithinDeadline = false;

  constructor(lease: { beforeDeadline(): boolean }) {
    this.#lease = lease;
  }

  /** Pass as the call's `onSent`: records one send. */
  readonly sent = (): void => {
    this.#earlierWithinDeadline = this.#withinDeadline > 0;
    if (this.#lease.beforeDeadline()) this.#withinDeadline++;
  };

  /** Whether "already gone" in the latest answer means the release is done (see the class comment). */
  get goneMeansDone(): boolean {
    return this.#earlierWithinDeadline;
  }
}

/**
 * The pause before the next background resend of a release (a held key's delete, an abandoned lease's
 * revocation) after `failures` failed sends: 250 ms, doubled after each failure, at most 2 s.
 */
export function resendPause(failures: number): number {
  return Math.min(250 * 2 ** failures, 2_000);
}
