// A Cloudflare Worker (module syntax, no nodejs_compat) that updates an order under an etcd lock.
//
// A Worker cannot keep timers or connections alive between requests, so each request takes a short lease
// with manual renewal, and `withLock` releases everything before the response is returned.
import { Etcd, isEtcdError, op } from "etcd-edge";

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const orderId = url.searchParams.get("order");
    const status = url.searchParams.get("status") ?? "paid";
    if (!orderId) return Response.json({ ok: false, reason: "missing ?order=" }, { status: 400 });

    // Cheap to create (no I/O, no timers): one per request, endpoints from the Worker's environment.
    const etcd = new Etcd({ endpoints: env.ETCD_ENDPOINTS.split(","), timeout: 3_000 });
    try {
      const result = await etcd.withLock(
        `orders/${orderId}/lock`,
        async (lock) => {
          const write = await etcd
            .txn()
            .if(lock.ifHeld())
            .then(op.put(`orders/${orderId}/status`, status), op.put(`orders/${orderId}/token`, String(lock.revision)))
            .commit();
          return { ok: write.succeeded, fencingToken: lock.revision };
        },
        { ttl: 5, keepAlive: "manual", timeout: 5_000, signal: request.signal },
      );
      return Response.json(result, { status: result.ok ? 200 : 409 });
    } catch (error) {
      if (isEtcdError(error))
        return Response.json({ ok: false, reason: error.code, message: error.message }, { status: 503 });
      throw error;
    }
  },
};
