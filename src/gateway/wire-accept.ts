/**
 * Plain predicates for the two answers a lock's every handoff parses (a transaction's, a watch message), so that
 * an answer etcd shaped as expected is taken as it is: zod's `safeParse` builds a new object per answer, which
 * on a hot name costs the client more than the rest of a handoff's own work, with etcd on the same two cores
 * (`npm run bench`, section 4). zod (wire.ts) stays the one definition of every shape and the source of every
 * error: what these do not accept goes to it. Each is sound, never looser than its schema: when it says true,
 * the schema's `safeParse` of the same value succeeds (test/unit/wire-accept.test.ts checks it on real answers
 * and on generated ones). Loops go by index: `for...of` allocates an iterator.
 */

type Check = (value: unknown) => boolean;

const int64 = (v: unknown) => typeof v === "string" || typeof v === "number";
const optInt64 = (v: unknown) => v === undefined || typeof v === "string" || typeof v === "number";
const optText = (v: unknown) => v === undefined || typeof v === "string";
const optFlag = (v: unknown) => v === undefined || typeof v === "boolean";

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function optArray(value: unknown, item: Check): boolean {
  if (value === undefined) return true;
  if (!Array.isArray(value)) return false;
  for (let i = 0; i < value.length; i++) if (!item(value[i])) return false;
  return true;
}

/** A header; `required`: a top-level one, whose revision etcd always sends. */
function header(value: unknown, required: boolean): boolean {
  if (value === undefined) return !required;
  return (
    isObject(value) &&
    (required ? int64(value.revision) : optInt64(value.revision)) &&
    optInt64(value.cluster_id) &&
    optInt64(value.member_id) &&
    optInt64(value.raft_term)
  );
}

function keyValue(value: unknown): boolean {
  return (
    isObject(value) &&
    typeof value.key === "string" &&
    optInt64(value.create_revision) &&
    optInt64(value.mod_revision) &&
    optInt64(value.version) &&
    optText(value.value) &&
    optInt64(value.lease)
  );
}

const optKeyValue = (v: unknown) => v === undefined || keyValue(v);

function responseOp(value: unknown): boolean {
  if (!isObject(value)) return false;
  const { response_range: range, response_put: put, response_delete_range: del, response_txn: txn } = value;
  return (
    (range === undefined ||
      (isObject(range) &&
        header(range.header, false) &&
        optArray(range.kvs, keyValue) &&
        optFlag(range.more) &&
        optInt64(range.count))) &&
    (put === undefined || (isObject(put) && header(put.header, false) && optKeyValue(put.prev_kv))) &&
    (del === undefined ||
      (isObject(del) && header(del.header, false) && optInt64(del.deleted) && optArray(del.prev_kvs, keyValue))) &&
    (txn === undefined || transaction(txn, false))
  );
}

function transaction(value: unknown, top: boolean): boolean {
  return (
    isObject(value) && header(value.header, top) && optFlag(value.succeeded) && optArray(value.responses, responseOp)
  );
}

/** A transaction's answer (wire.ts `txnResponse`). */
export const acceptsTxn: Check = (value) => transaction(value, true);

function event(value: unknown): boolean {
  if (!isObject(value)) return false;
  const type = value.type;
  return (type === undefined || int64(type)) && keyValue(value.kv) && optKeyValue(value.prev_kv);
}

/** A watch message (wire.ts `watchResponse`): only a cancellation may lack its header's revision. */
export const acceptsWatch: Check = (value) => {
  if (!isObject(value)) return false;
  const canceled = value.canceled;
  return (
    (canceled === true
      ? isObject(value.header) && header(value.header, false)
      : optFlag(canceled) && header(value.header, true)) &&
    optInt64(value.watch_id) &&
    optFlag(value.created) &&
    optInt64(value.compact_revision) &&
    optText(value.cancel_reason) &&
    optFlag(value.fragment) &&
    optArray(value.events, event)
  );
};
