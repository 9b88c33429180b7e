import type { ResponseHeader } from "../../api/codec.js";
import type { EtcdError } from "../../errors/etcd-error.js";
import type { LeaseSession } from "../lease/lease-session.js";
import type { ReleaseSends } from "../lease/release-sends.js";

/** What every holding is made of. */
export interface HeldInit<S extends LeaseSession = LeaseSession> {
  session: S;
  /** The header of the response that showed it acquired. */
  header: ResponseHeader;
}

/**
 * Where a holding is in its life: the one value from which `held`, `signal`, every error and every event are
 * derived. Only `held` holds; `released` and `lost` are final.
 * - `releasing`: a release was sent and has no outcome yet. The caller gave it up, so it no longer holds, but
 *   its keys may still be there; `sends` decides what "already gone" means on a resend.
 * - `released`: deleted by its release, or with its lease by its session's `close()`. `untold`: a release
 *   finished in the background, which the next `unlock()` reports as its success.
 * - `lost`: its keys were gone, or no longer its own, before its release: the work under it was not protected to
 *   the end.
 */
export type Status =
  | { readonly is: "held" }
  | Releasing
  | { readonly is: "released"; readonly why: string; untold: boolean }
  | { readonly is: "lost"; readonly error: EtcdError };

export interface Releasing {
  readonly is: "releasing";
  readonly sends: ReleaseSends;
  /** The send in flight, shared by every caller of `unlock()` meanwhile. */
  sending?: Promise<void> | undefined;
  /** Resent in the background after a send went unanswered; `told`: a caller shares the current send. */
  background: boolean;
  told: boolean;
  /** Why `signal` aborted before the outcome was known: a send went unanswered. */
  pending?: EtcdError | undefined;
}

/** What a holding of one key is made of. */
export interface HeldKeyInit<S extends LeaseSession = LeaseSession> extends HeldInit<S> {
  name: string;
  key: string;
  revision: number;
}
