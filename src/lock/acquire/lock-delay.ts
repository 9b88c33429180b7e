import type { EtcdClient } from "../../api/client.js";
import type { KeyValue } from "../../api/codec.js";
import { leaseText } from "../../errors/catalogue.js";
import { isEtcdError } from "../../errors/etcd-error.js";
import { requestFor, requestKey } from "../line/requests.js";

/**
 * How the contender ahead (`departed`, as the waiter last read it) left its line, read after its key went: a
 * sentence if it left uncleanly, undefined after a clean release. Its lease gone means it expired or was revoked
 * (a crash, a freeze, a lost network, or a session closed while holding); a revocation record for it
 * (line/requests.ts) means an operator took it. A key deleted while its lease lives, with no such record, was
 * released: by its holder, or by a tool that deleted it (which no read can tell apart). Two reads at once; a read
 * that fails leaves it unknown, which counts as unclean: a delay too many is safe, one too few is not.
 */
export async function uncleanExit(
  client: EtcdClient,
  departed: KeyValue,
  signal: AbortSignal,
): Promise<string | undefined> {
  const [lease, record] = await Promise.allSettled([
    client.lease.timeToLive(departed.lease, { signal }),
    client.get(requestKey(departed.key), { signal }),
  ]);
  signal.throwIfAborted();
  if (lease.status === "rejected") {
    return isEtcdError(lease.reason, "LEASE_NOT_FOUND")
      ? `its ${leaseText(departed.lease)} ended (it expired or was revoked) while it was in line`
      : "how it left could not be read";
  }
  // Without a grant to read the records, a revocation cannot be told from a release.
  if (record.status === "rejected") {
    return isEtcdError(record.reason, "PERMISSION_DENIED") ? undefined : "how it left could not be read";
  }
  if (requestFor(record.value?.value, departed.createRevision)?.kind === "revoke") return "it was revoked";
  return undefined;
}
