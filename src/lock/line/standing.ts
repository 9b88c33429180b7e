import type { KeyValue, ResponseHeader } from "../../api/codec.js";
import type { EtcdError } from "../../errors/etcd-error.js";

/**
 * Where a contender stands in its line, as its join or a read showed it: the one shape every recipe's join and
 * read give, and every wait takes.
 */
export interface Standing {
  header: ResponseHeader;
  /** Our key's create revision: our place in the line, and the fencing token once we hold. */
  revision: number;
  /** Our key is still there; false when it went (our lease ended) while we waited. */
  present: boolean;
  /** The key we wait for; undefined when nothing is ahead of us. */
  predecessor?: KeyValue | undefined;
  /** The predecessor is the only key ahead (the holder): its delete alone makes us first, with no read. */
  predecessorIsFirst?: boolean | undefined;
  /** How many keys are ahead of ours, when the join or read could tell. */
  ahead?: number | undefined;
}

/**
 * How a wait for the predecessor's delete ended: `head`, the predecessor was the line's head (the holder) when it
 * went, so nothing is ahead of us any more; else `now`, a read of where we stand.
 */
export type Woken = { readonly head: ResponseHeader } | { readonly now: Standing };

/** A key and the revision that created it: one incarnation of the key (Go's keys are made again and again). */
export type Incarnation = Pick<KeyValue, "key" | "createRevision">;

/** How a read of the line is sent: its signal, and an endpoint not to try first (one that may have stalled). */
export interface ReadAt {
  signal: AbortSignal;
  avoid?: string | undefined;
}

/** One read of where a waiter stands now. */
export type LineReader = (at: ReadAt) => Promise<Standing>;

/**
 * What a join's request is sent with: the signal that cuts it off (the session's: a join cut off in flight may
 * still land), the count of its sends handed to fetch and of those answered without effect, and `idempotent`:
 * a join is a create-if-absent of a key of its own, so a repeat finds the key and changes nothing.
 */
export interface JoinCall {
  signal: AbortSignal;
  onSent: () => void;
  onRefused: () => void;
  idempotent: true;
  /** The acquisition only tries (`timeout: 0`): a join may put its key only where it holds at once. */
  tryOnly: boolean;
}

/**
 * What a join showed of the line: where we stand, and whether this send created our key (else an earlier one
 * had, and one read finds our predecessor). `holder`: the line's first key when it is not ours; undefined
 * when we hold.
 */
export interface Joined extends Standing {
  created: boolean;
  holder?: KeyValue | undefined;
  /** A try found the line busy and put nothing: `holder` holds it. */
  busy?: boolean | undefined;
}

/** How a contender waits: a watch on the key ahead of it (the default), or polls of the line. */
export type WaitMode = "watch" | "poll";

/** What a wait needs of its acquisition. */
export interface WaitContext {
  readonly signal: AbortSignal;
  readonly mode: WaitMode;
  readonly pollInterval: number;
  /** The error for "our own key is gone": our lease ended while we waited. */
  expired(): EtcdError;
  /** Nothing is ahead of us since `departed` left (the key we last waited for): settles before we hold. */
  handover(departed: KeyValue): Promise<void>;
}

/** What a recipe's wait needs of its acquisition besides the wait's context. */
export interface Waiting extends WaitContext {
  /** `timeout: 0`: try once, never wait. */
  readonly tryOnly: boolean;
  /** Tells `onEvent` the acquisition must wait; `position` counts the keys ahead of it, when known. */
  waiting(position?: number): void;
}
