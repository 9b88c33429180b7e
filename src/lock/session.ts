import type { EtcdClient } from "../api/client.js";
import { Election } from "./election.js";
import { LeaseSession, openLease, type SessionOptions } from "./lease-session.js";
import { Mutex } from "./mutex.js";

/**
 * A {@link LeaseSession} with factories for what is built on it: `session.mutex(name)` is
 * `new Mutex(session, name)`, as Go's `concurrency.NewMutex(session, name)`.
 */
export class Session extends LeaseSession {
  /** @internal Use `etcd.session()`: grants (or adopts) the lease, then starts the session's timers. */
  static async create(client: EtcdClient, options: SessionOptions = {}): Promise<Session> {
    return new Session(client, await openLease(client, options)).start();
  }

  /** A mutex named `name` whose key is bound to this session's lease. */
  mutex(name: string): Mutex<this> {
    return new Mutex(this, name);
  }

  /** A leader election named `name`, campaigning with this session's lease. */
  election(name: string): Election<this> {
    return new Election(this, name);
  }
}
