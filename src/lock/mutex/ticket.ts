import type { LeaseId } from "../../api/codec.js";

/**
 * What another process or invocation needs to take over a held lock: small and JSON-serialisable. It is a
 * capability: `secret` (the lock key's value, which only the holder has read) lets whoever has the ticket
 * take the lock over, once. Send it only over a channel you trust, and stop using the lock once sent.
 */
export interface LockTicket {
  /** The lock's name, as given to `mutex(name)`. */
  name: string;
  /** The lock's key in etcd, `<name>/<leaseIdHex>_<16 hex>`: the acquisition's own, which the takeover moves. */
  key: string;
  /** The lease the key is bound to now. */
  leaseId: LeaseId;
  /** The fencing token, as `lock.revision`. */
  revision: number;
  /** The key's value when the ticket was made: the takeover checks it and writes a new one, so it works once. */
  secret: string;
  /** The TTL in seconds of the sender's lease; the lease the takeover grants has the same unless told otherwise. */
  ttl?: number | undefined;
}
