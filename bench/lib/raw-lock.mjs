// The raw floor: the requests of an uncontended etcd-edge lock+unlock, written by hand against the gateway
// with the same fetch, and really taking and releasing a lock. The enqueue transaction puts the mutex's key,
// `<name>/<leaseHex>_<16 hex>` (reused from one acquisition to the next, as a mutex reuses its key once its
// release is confirmed), bound to the lease, with the mutex's secret as its value (a ticket's proof), if no key
// is under `<name>/` (the line is empty), and the lock is then taken at the transaction's revision: the put
// alone that an etcd-edge mutex sends while its line was empty at its last joins (behind a holder it sends a
// larger join, which a floor that must take the lock at once has no use for). The release is a delete
// guarded by the key's mod revision (the key is written once, so it is the create revision). No client
// library work is left but JSON.parse and one string per request.
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
export const SDK_HEADERS = {
  "content-type": "application/json",
  "user-agent": `etcd-edge/${VERSION}`,
  "grpc-metadata-hasleader": "true",
};

/**
 * `send` with what the SDK must give every request and the bare floor leaves out: a deadline of its own (a
 * controller and a timer), and no redirect followed. The same floor with that cost added, to show how much of
 * the SDK's ratio to the bare floor it takes.
 */
export function withDeadline(send, ms = 10_000) {
  return (url, init) => {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), ms);
    return send(url, { ...init, signal: controller.signal, redirect: "manual" }).finally(() => clearTimeout(timer));
  };
}

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

/**
 * A hand-written mutex on `name` for lease `leaseId`: `lock()` resolves to the fencing revision. `random`: the
 * key's 16 hex digits (fresh ones by default).
 */
export function rawMutex(send, endpoint, name, leaseId, random = randomHex()) {
  const key = b64(`${name}/${BigInt(leaseId).toString(16)}_${random}`);
  const secret = b64(Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("hex"));
  const line = { key: b64(`${name}/`), range_end: prefixEnd(`${name}/`) };
  const put = { request_put: { key, value: secret, lease: leaseId } };
  // Zero values left out, as the SDK leaves them out (and protojson): a compare over the line with target
  // VERSION, result EQUAL and version 0 is the line alone; no empty `failure` list.
  const enqueueBody = JSON.stringify({ compare: [line], success: [put] });
  const unlockBody = (revision) =>
    `{"compare":[{"key":"${key}","target":"MOD","mod_revision":"${revision}"}],` +
    `"success":[{"request_delete_range":{"key":"${key}"}}]}`;
  const txn = `${endpoint}/v3/kv/txn`;
  return {
    enqueueBody,
    unlockBody,
    async lock() {
      const res = await post(send, txn, enqueueBody);
      if (!res.succeeded) throw new Error(`raw lock on ${name} not acquired (key left over, or held by another)`);
      return res.header.revision;
    },
    async unlock(revision) {
      const res = await post(send, txn, unlockBody(revision));
      if (!res.succeeded || res.responses[0].response_delete_range.deleted !== "1")
        throw new Error(`raw unlock on ${name} found no key`);
    },
  };
}

function randomHex() {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString("hex");
}

/** The 16 hex digits of the key an enqueue body puts (`<name>/<leaseHex>_<16 hex>`). */
export function keyRandom(enqueueBody) {
  const key = Buffer.from(JSON.parse(enqueueBody).success[0].request_put.key, "base64").toString();
  return key.slice(key.lastIndexOf("_") + 1);
}

/**
 * Whether the SDK's own requests for a lock+unlock (captured bodies) are the floor's, key for key, with
 * the revision in the unlock guard and the secret's random bytes set aside (same length, not same bytes).
 * If the SDK changes its requests, the floor must follow.
 */
export function floorMatches(captured, floor) {
  const canon = (json) => JSON.stringify(sortKeys(json));
  const revision = JSON.parse(captured.unlock).compare?.[0]?.mod_revision;
  const ours = JSON.parse(floor.enqueueBody).success[0].request_put.value;
  const enqueue = canon(withValue(JSON.parse(captured.enqueue), ours)) === canon(JSON.parse(floor.enqueueBody));
  const unlock = canon(JSON.parse(captured.unlock)) === canon(JSON.parse(floor.unlockBody(revision)));
  return { match: enqueue && unlock, enqueue, unlock };
}

/** `json` with every put's value of the same length as `value` set to it (the secret's bytes are random). */
function withValue(json, value) {
  if (Array.isArray(json)) return json.map((item) => withValue(item, value));
  if (json === null || typeof json !== "object") return json;
  const out = Object.fromEntries(Object.entries(json).map(([k, v]) => [k, withValue(v, value)]));
  if (typeof out.request_put?.value === "string" && out.request_put.value.length === value.length)
    out.request_put = { ...out.request_put, value };
  return out;
}

function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((k) => [k, sortKeys(value[k])]),
  );
}
