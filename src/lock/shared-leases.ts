import type { EtcdClient } from "../api/client.js";
import { aborted } from "../errors/catalogue.js";
import { isEtcdError } from "../errors/etcd-error.js";
import { untilAborted } from "../gateway/signals.js";
import { openLease } from "./lease/lease-grant.js";
import { Session } from "./session.js";

interface Shared {
  pending: Promise<Session>;
  /** The session once granted. */
  current?: Session | undefined;
  /** Calls using the session now. */
  users: number;
}

/**
 * The leases a client keeps for its one-shot locks (`withLock` with `lease: "shared"`), one per TTL, so that
 * a warm serverless invocation (a module-scope client in Lambda, one per isolate in Workers) pays two
 * requests per lock, take and release, instead of three (grant, take, revoke).
 *
 * Nothing runs between calls: a shared lease is a manual session whose deadline timer stops when its last
 * user is done. It is renewed only while a call waits (at once, beside the take, when less than two thirds
 * of its TTL is left) or, in auto mode, works. A lease that ended while the process was frozen is found out
 * by the server, which refuses a key on an unknown lease: that costs one extra grant, never a wrong lock.
 * The trade-off: a shared lease outlives the last call by up to its TTL. It holds no key by then, so it
 * blocks nobody; `etcd.close()` revokes it at once.
 */
export class SharedLeases {
  readonly #client: EtcdClient;
  readonly #byTtl = new Map<number, Shared>();

  constructor(client: EtcdClient) {
    this.#client = client;
  }

  /**
   * A trusted session with this TTL for one call, granted if there is none; pair with `done()`. The grant is
   * no caller's own: `signal` ends this caller's wait, not the grant others wait on too. Each caller keeps
   * what the grant gave in its own continuation, since in Workers a grant belongs to the request that sent it
   * and nothing that request chained to it runs once it has ended; the callers left see the grant fail and
   * grant again, once.
   */
  async use(ttl: number, signal: AbortSignal | undefined, again = true): Promise<Session> {
    let shared = this.#byTtl.get(ttl);
    if (shared?.current !== undefined && !shared.current.alive) {
      this.#byTtl.delete(ttl);
      shared = undefined;
    }
    if (shared === undefined) {
      const pending = openLease(this.#client, { ttl, keepAlive: "manual" }).then(
        (lease) => new Session(this.#client, lease),
      );
      pending.catch(() => {});
      shared = { pending, users: 0 };
      this.#byTtl.set(ttl, shared);
    }
    shared.users++;
    try {
      const session = await (signal === undefined ? shared.pending : untilAborted(shared.pending, signal));
      shared.current ??= session;
      return session.start();
    } catch (error) {
      shared.users--;
      if (signal?.aborted) throw aborted(signal.reason);
      // A failed grant is not kept for the next call.
      if (this.#byTtl.get(ttl) === shared) this.#byTtl.delete(ttl);
      // Not etcd's answer but a grant the runtime dropped (above): this caller grants itself, once.
      if (again && !isEtcdError(error)) return this.use(ttl, signal, false);
      throw error;
    }
  }

  /** One call is done with `session`; the last one stops its timers. */
  done(ttl: number, session: Session): void {
    const shared = this.#byTtl.get(ttl);
    if (shared?.current !== session || --shared.users <= 0) session.idle();
  }

  /** The server no longer knows this session's lease: the next call grants a new one. */
  forget(ttl: number, session: Session): void {
    if (this.#byTtl.get(ttl)?.current === session) this.#byTtl.delete(ttl);
  }

  /** Revokes every shared lease (their locks were all released by their calls). */
  async close(): Promise<void> {
    const sessions = [...this.#byTtl.values()];
    this.#byTtl.clear();
    await Promise.all(
      sessions.map(async (shared) => {
        const session = await shared.pending.catch(() => undefined);
        await session?.close();
      }),
    );
  }
}
