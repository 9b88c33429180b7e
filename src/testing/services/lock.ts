import { binToBase64 } from "../wire/bytes.js";
import { bin, int } from "../wire/message.js";
import { LockRequest, UnlockRequest } from "../wire/schema.js";
import { InProcessClient } from "./client.js";
import { lockMutex, sessionLease } from "./concurrency.js";
import { unary } from "./route.js";

/**
 * etcd's v3lock service: /v3/lock/lock holds the request open until the lock is acquired (a key
 * `<name>/<lease hex>` first in create-revision order under `<name>/`), /v3/lock/unlock deletes the key given.
 */
export const lockRoutes = {
  "/v3/lock/lock": unary(LockRequest, async (member, call) => {
    member.user(call);
    const client = new InProcessClient(member, call.signal);
    const lease = sessionLease(client, int(call.msg, "lease"));
    const { header, key } = await lockMutex(client, member.dialect.lockRechecksOwnKey, bin(call.msg, "name"), lease);
    return { header, key: binToBase64(key) };
  }),
  "/v3/lock/unlock": unary(UnlockRequest, (member, call) => {
    member.user(call);
    return { header: new InProcessClient(member, call.signal).delete(bin(call.msg, "key")) };
  }),
};
