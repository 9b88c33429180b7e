// The raw floor: the requests of an uncontended etcd-edge lock+unlock, written by hand against the gateway
// with the same fetch, and really taking and releasing a lock. The enqueue transaction puts
// `<name>/<leaseHex>` bound to the lease, with the mutex's secret as its value (a ticket's proof), if its
// create revision is 0, and reads the holder (the oldest key under `<name>/`) and the two newest keys (ours
// and a predecessor), without values, as the SDK does; the lock is taken when the holder's create revision
// is the transaction's revision. The release is a delete guarded by the key's mod revision (the key is
// written once, so it is the create revision). No client library work is left but JSON.parse and one
// string per request.
import { VERSION } from "etcd-edge";

export const b64 = (text) => Buffer.from(text).toString("base64");

/** The key after every key that starts with `prefix` (etcd's range_end for a prefix). */
function prefixEnd(prefix) {
  const bytes = Buffer.from(prefix);
  for (let i = bytes.length - 1; i >= 0; i--) {
    if (bytes[i] < 0xff) return Buffer.from([...bytes.subarray(0, i), bytes[i] + 1]).toString("base64");
  }
  return Buffer.from([0]).toString("base64");
}

/** The headers the SDK sends with its default options. */
export const SDK_HEADERS = { "content-type": "application/json", "user-agent": `etcd-edge/${VERSION}`, "grpc-metadata-hasleader": "true" };

async function post(send, url, body) {
  const response = await send(url, { method: "POST", headers: SDK_HEADERS, body });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${url}: HTTP ${response.status} ${text}`);
  return JSON.parse(text);
}

export async function grantRawLease(send, endpoint, ttl) {
  return (await post(send, `${endpoint}/v3/lease/grant`, JSON.stringify({ TTL: String(ttl) }))).ID;
}

export async function revokeRawLease(send, endpoint, id) {
  await post(send, `${endpoint}/v3/lease/revoke`, JSON.stringify({ ID: id }));
}

/** A hand-written mutex on `name` for lease `leaseId`: `lock()` resolves to the fencing revision. */
export function rawMutex(send, endpoint, name, leaseId) {
  const key = b64(`${name}/${BigInt(leaseId).toString(16)}`);
  const secret = b64(Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("hex"));
  const owner = { key: b64(`${name}/`), range_end: prefixEnd(`${name}/`), limit: "1", sort_target: "CREATE", sort_order: "ASCEND", keys_only: true };
  const newest = { ...owner, limit: "2", sort_order: "DESCEND" };
  const enqueueBody = JSON.stringify({
    compare: [{ key, target: "CREATE", result: "EQUAL", create_revision: "0" }],
    success: [{ request_put: { key, value: secret, lease: leaseId } }, { request_range: owner }, { request_range: newest }],
    failure: [{ request_range: { key } }, { request_range: owner }],
  });
  const unlockBody = (revision) =>
    `{"compare":[{"key":"${key}","target":"MOD","result":"EQUAL","mod_revision":"${revision}"}],"success":[{"request_delete_range":{"key":"${key}"}}],"failure":[]}`;
  const txn = `${endpoint}/v3/kv/txn`;
  return {
    enqueueBody,
    unlockBody,
    async lock() {
      const res = await post(send, txn, enqueueBody);
      const revision = res.header.revision;
      if (!res.succeeded || res.responses[1].response_range.kvs[0].create_revision !== revision) {
        throw new Error(`raw lock on ${name} not acquired (key left over, or held by another)`);
      }
      return revision;
    },
    async unlock(revision) {
      const res = await post(send, txn, unlockBody(revision));
      if (!res.succeeded || res.responses[0].response_delete_range.deleted !== "1") throw new Error(`raw unlock on ${name} found no key`);
    },
  };
}

/**
 * Whether the SDK's own requests for a lock+unlock (captured bodies) are the floor's, key for key, with
 * the revision in the unlock guard and the secret's random bytes set aside (same length, not same bytes).
 * If the SDK changes its requests, the floor must follow.
 */
export function floorMatches(captured, floor) {
  const canon = (json) => JSON.stringify(sortKeys(JSON.parse(json)));
  const revision = JSON.parse(captured.unlock).compare?.[0]?.mod_revision;
  const sdk = JSON.parse(captured.enqueue);
  const put = sdk.success?.[0]?.request_put;
  const ours = JSON.parse(floor.enqueueBody).success[0].request_put.value;
  if (put?.value?.length === ours.length) put.value = ours;
  const enqueue = canon(JSON.stringify(sdk)) === canon(floor.enqueueBody);
  const unlock = canon(captured.unlock) === canon(floor.unlockBody(revision));
  return { match: enqueue && unlock, enqueue, unlock };
}

function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(Object.keys(value).sort().map((k) => [k, sortKeys(value[k])]));
}
