/**
 * The sends of one release (a held key's guarded delete, a lease's revocation). A resend after a lost answer may
 * find the key (or lease) gone: if an earlier send left within the lease's deadline, that is success (it did it,
 * or the lease ended after it, that is after the work); only when the first send finds it gone was it lost.
 */
export class ReleaseSends {
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

  /** Whether a send left while the lease was within its deadline. */
  get sentWithinDeadline(): boolean {
    return this.#withinDeadline > 0;
  }

  /** Whether "already gone" in the latest answer means the release is done. */
  get goneMeansDone(): boolean {
    return this.#earlierWithinDeadline;
  }
}
