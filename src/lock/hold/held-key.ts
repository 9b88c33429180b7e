import { cmp, type Compare } from "../../api/txn.js";
import type { LeaseSession } from "../session/lease-session.js";
import { Held, type HeldInit } from "./held.js";
import type { Subject } from "./subject.js";

/** What a holding of one key is made of. */
export interface HeldKeyInit<S extends LeaseSession = LeaseSession> extends HeldInit<S> {
  name: string;
  key: string;
  revision: number;
}

/**
 * A holding of one key: a lock, a permit, a read or write lock. `revision` (the key's create revision) is
 * its fencing token: it strictly increases across successive holders, so storage guarded by `ifHeld()`
 * refuses a stale holder's write.
 */
export abstract class HeldKey<S extends LeaseSession = LeaseSession> extends Held<S> {
  /** The name it was taken on. */
  readonly name: string;
  /** Its key in etcd. */
  readonly key: string;
  /** The fencing token: the create revision of its key. */
  readonly revision: number;

  /**
   * @internal Its key is written once, by its join, unless `modRevision` says otherwise: then its release is
   * guarded by that version (a mutex's lock).
   */
  constructor(init: HeldKeyInit<S>, subject: Subject, modRevision?: number) {
    const own = { key: init.key, revision: init.revision, modRevision: modRevision ?? init.revision };
    super(init, subject, { keys: [own], byVersion: modRevision !== undefined });
    this.name = init.name;
    this.key = init.key;
    this.revision = init.revision;
  }

  /** The compare "its key still has this create revision", for fenced transactions. */
  ifHeld(): Compare {
    return cmp.createRevision(this.key, "==", this.revision);
  }
}
