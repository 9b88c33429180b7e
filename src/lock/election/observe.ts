import type { KeyValue, LeaseId, ResponseHeader } from "../../api/codec.js";
import type { EtcdClient } from "../../api/client.js";
import { OLDEST } from "../line/read.js";

/** The leader of an election, as `election.leader()` and `election.observe()` see it. */
export interface Leader {
  /** The leader's key, `<name>/<leaseIdHex>`. */
  key: string;
  /** The leader's latest proclamation. */
  value: string;
  /** The proclamation's bytes, for a value that is not text. */
  valueBytes: Uint8Array;
  /** The create revision of the leader's key: strictly increases with each new leader. */
  revision: number;
  /** The leader's session lease: leadership ends with it. */
  leaseId: LeaseId;
  /** The header of the read (or watch message) that showed this leader. */
  header: ResponseHeader;
}

/**
 * Every leader and proclamation in order, as Go's `Observe`: the current leader first, then each new value it
 * proclaims, then the next leader after it goes. Ends when `signal` aborts.
 */
export async function* observe(
  client: EtcdClient,
  prefix: string,
  signal: AbortSignal | undefined,
): AsyncGenerator<Leader, void, undefined> {
  for (;;) {
    const { kvs, header } = await client.range({ ...OLDEST, prefix, signal });
    let current: Leader | undefined = kvs[0] === undefined ? undefined : toLeader(kvs[0], header);
    if (current === undefined) {
      // Nobody leads: the first put under the prefix is the next leader.
      for await (const batch of client.watch({
        prefix,
        startRevision: header.revision,
        noDelete: true,
        signal,
      })) {
        const put = batch.events[0];
        if (put !== undefined) {
          current = toLeader(put.kv, { ...batch.header, revision: put.kv.modRevision });
          break;
        }
      }
      if (current === undefined) return;
    }
    yield current;
    let deleted = false;
    for await (const batch of client.watch({ key: current.key, startRevision: current.header.revision + 1, signal })) {
      for (const event of batch.events) {
        if (event.type === "delete") {
          deleted = true;
          break;
        }
        yield toLeader(event.kv, batch.header);
      }
      if (deleted) break;
    }
    if (!deleted) return;
  }
}

export function toLeader(kv: KeyValue, header: ResponseHeader): Leader {
  return {
    key: kv.key,
    value: kv.value,
    valueBytes: kv.valueBytes,
    revision: kv.createRevision,
    leaseId: kv.lease,
    header,
  };
}
