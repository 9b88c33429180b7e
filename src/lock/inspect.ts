import type { EtcdClient } from "../api/client.js";
import type { LeaseId, ResponseHeader } from "../api/codec.js";
import { invalidArgument } from "../errors/catalogue.js";
import { isEtcdError } from "../errors/etcd-error.js";
import type { CallOptions } from "../gateway/transport.js";
import { OLDEST } from "./queue.js";

export interface LockInfo {
  /** The current holder, or undefined when the lock is free. */
  holder:
    | {
        key: string;
        /** The holder's fencing token. */
        revision: number;
        leaseId: LeaseId;
        /** Seconds the holder's lease has left (0 if it ended just now). */
        ttl: number;
      }
    | undefined;
  /** How many sessions wait behind the holder. */
  waiters: number;
  header: ResponseHeader;
}

/** Who holds lock `name` and how many wait, without joining the line. Two requests when held, one when free. */
export async function inspectLock(client: EtcdClient, name: string, options: CallOptions = {}): Promise<LockInfo> {
  if (typeof name !== "string" || name.length === 0) throw invalidArgument("a lock name must be a non-empty string");
  const { kvs, count, header } = await client.range({ ...OLDEST, prefix: `${name}/`, ...options });
  const kv = kvs[0];
  if (kv === undefined) return { holder: undefined, waiters: 0, header };
  const ttl = await client.lease.timeToLive(kv.lease, options).then(
    (lease) => lease.ttl,
    (error: unknown) => {
      if (isEtcdError(error, "LEASE_NOT_FOUND")) return 0;
      throw error;
    },
  );
  return { holder: { key: kv.key, revision: kv.createRevision, leaseId: kv.lease, ttl }, waiters: Math.max(0, count - 1), header };
}
