// A Cloudflare Worker (module syntax, no nodejs_compat) that records an order's status under an etcd lock.
//
// One client per isolate, shared by the requests it serves: a warm `withLock` costs two requests (take and
// release) on the client's shared lease, and with auth on the isolate authenticates once, not per request.
import { Etcd, isEtcdError, op } from "etcd-edge";

/** @type {Etcd | undefined} */
let etcd;

/** The isolate's client, made by its first request: a module Worker is given `env` with each request. */
function client(env) {
  etcd ??= new Etcd({
    endpoints: env.ETCD_ENDPOINTS.split(","),
    // Secrets (`npx wrangler secret put ETCD_PASSWORD`); unset when etcd runs without auth.
    auth: env.ETCD_PASSWORD ? { username: env.ETCD_USERNAME, password: env.ETCD_PASSWORD } : undefined,
    timeout: 3_000,
  });
  return etcd;
}

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    const orderId = url.searchParams.get("order");
    const status = url.searchParams.get("status") ?? "paid";
    if (!orderId) return Response.json({ ok: false, reason: "missing ?order=" }, { status: 400 });

    const etcd = client(env);
    const key = `orders/${orderId}`;
    try {
      const result = await etcd.withLock(
        `${key}/lock`,
        async (lock) => {
          // Read, change, write back: the lock keeps two requests from interleaving, and the write lands only
          // while the lock is still ours (lock.revision is its fencing token).
          const order = JSON.parse((await etcd.get(key))?.value ?? '{"history":[]}');
          order.status = status;
          order.history.push(status);
          const write = await etcd
            .txn()
            .if(lock.ifHeld())
            .then(op.put(key, JSON.stringify(order)))
            .commit();
          return { ok: write.succeeded, fencingToken: lock.revision, updates: order.history.length };
        },
        {
          // Renewed only while a request waits for the lock: nothing runs between requests.
          ttl: 30,
          keepAlive: "manual",
          timeout: 5_000,
          // The release is sent after the response, which goes out one round trip sooner.
          waitUntil: ctx.waitUntil.bind(ctx),
        },
      );
      return Response.json(result, { status: result.ok ? 200 : 409 });
    } catch (error) {
      if (isEtcdError(error))
        return Response.json({ ok: false, reason: error.code, message: error.message }, { status: 503 });
      throw error;
    }
  },
};
