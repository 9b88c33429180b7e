import type { EtcdClient } from "../../api/client.js";
import type { KeyValue } from "../../api/codec.js";
import { op } from "../../api/txn.js";
import { backoff } from "../../gateway/retry-policy.js";
import { delay } from "../../gateway/signals.js";
import type { LeaseSession } from "../lease/lease-session.js";
import type { OwnKey } from "./explain.js";

/**
 * How long a holding lasts before it follows its keys on a watch. A warm `withLock` is over long before, and
 * pays nothing; a holding that lasts learns of an outside delete, overwrite or revocation within one event,
 * where it would otherwise say `held` until its lease's deadline or its release.
 */
export const FOLLOW_AFTER = 1_000;

/** One holding's key, followed. */
interface Follower extends OwnKey {
  leaseId: string;
  byVersion: boolean;
  gone: () => void;
}

/**
 * Follows `keys` of a holding in `session` until the returned function is called, and calls `gone` once when
 * one of them is deleted, re-created, moved to another lease or (`byVersion`) rewritten. One stream per line
 * (the keys under a key's parent) and client, shared by every holding of the client in that line.
 */
export function follow(
  session: LeaseSession,
  keys: readonly OwnKey[],
  byVersion: boolean,
  gone: () => void,
): () => void {
  let told = false;
  const once = () => {
    if (told) return;
    told = true;
    gone();
  };
  const leaves = keys.map((own) =>
    lineOf(session.client, own.key).add({ ...own, leaseId: session.leaseId, byVersion, gone: once }),
  );
  return () => {
    for (const leave of leaves) leave();
  };
}

/** Whether `kv` (undefined: absent) is no longer the follower's key. */
function changed(follower: Follower, kv: KeyValue | undefined): boolean {
  return (
    kv === undefined ||
    kv.createRevision !== follower.revision ||
    kv.lease !== follower.leaseId ||
    (follower.byVersion && kv.modRevision !== follower.modRevision)
  );
}

const linesByClient = new WeakMap<EtcdClient, Map<string, FollowedLine>>();

function lineOf(client: EtcdClient, key: string): FollowedLine {
  const prefix = key.slice(0, key.lastIndexOf("/") + 1);
  let lines = linesByClient.get(client);
  if (lines === undefined) linesByClient.set(client, (lines = new Map()));
  let line = lines.get(prefix);
  if (line === undefined) {
    const own = lines;
    const made: FollowedLine = new FollowedLine(client, prefix, () => {
      if (own.get(prefix) === made) own.delete(prefix);
    });
    own.set(prefix, made);
    line = made;
  }
  return line;
}

/**
 * The watch of one line's held keys. Each time its stream is created (first, and after every break) it reads
 * the keys it follows once: what changed before the stream could show it.
 */
class FollowedLine {
  readonly #client: EtcdClient;
  readonly #prefix: string;
  readonly #forget: () => void;
  readonly #followers = new Map<string, Set<Follower>>();
  readonly #stop = new AbortController();

  constructor(client: EtcdClient, prefix: string, forget: () => void) {
    this.#client = client;
    this.#prefix = prefix;
    this.#forget = forget;
    void this.#run();
  }

  add(follower: Follower): () => void {
    let set = this.#followers.get(follower.key);
    if (set === undefined) this.#followers.set(follower.key, (set = new Set()));
    set.add(follower);
    // Joined an open stream: one read covers what it showed before.
    if (this.#created) void this.#check([follower]);
    return () => {
      set.delete(follower);
      if (set.size === 0 && this.#followers.get(follower.key) === set) this.#followers.delete(follower.key);
      if (this.#followers.size === 0) this.#close();
    };
  }

  #created = false;

  #close(): void {
    this.#forget();
    this.#stop.abort();
  }

  async #run(): Promise<void> {
    const signal = this.#stop.signal;
    for (let failures = 0; !signal.aborted; failures++) {
      this.#created = false;
      try {
        const stream = this.#client.watch({
          prefix: this.#prefix,
          signal,
          background: true,
          onCreated: () => {
            this.#created = true;
            void this.#check([...this.#followers.values()].flatMap((set) => [...set]));
          },
        });
        for await (const batch of stream) {
          failures = 0;
          for (const event of batch.events) {
            for (const follower of this.#followers.get(event.kv.key) ?? []) {
              if (changed(follower, event.type === "delete" ? undefined : event.kv)) follower.gone();
            }
          }
        }
      } catch {
        // Broken beyond its own reconnections: open it again while anyone follows.
      }
      await delay(backoff(failures, 250, 5_000), signal).catch(() => {});
    }
  }

  /** One read of the followers' keys. */
  async #check(followers: Follower[]): Promise<void> {
    if (followers.length === 0) return;
    try {
      const read = await this.#client
        .txn()
        .then(...followers.map((f) => op.get(f.key)))
        .commit({ signal: this.#stop.signal });
      followers.forEach((follower, i) => {
        if (changed(follower, read.responses[i]?.kvs[0])) follower.gone();
      });
    } catch {
      // The stream's next creation reads them again.
    }
  }
}
