// workerd entry (module syntax, no nodejs_compat): one client per isolate with auth on, shared by its requests.
// GET /put?key=...&giveUpAfter=ms writes the key; with giveUpAfter the call is aborted after that many ms, so the
// request can end while the authenticate it started is still unanswered.
// GET /lock?name=...&lease=per-call|shared&ttl=s holds lock `name` for 20 ms, with `withLock`, and answers its
// fencing token: concurrent requests of the isolate wait in one line through its one client (giveUpAfter too).
import { Etcd, isEtcdError } from "etcd-edge";

let etcd;

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/ping") return new Response("pong");
    if (url.pathname !== "/put" && url.pathname !== "/lock") return new Response("not found", { status: 404 });
    etcd ??= new Etcd({
      endpoints: [env.ETCD_ENDPOINTS],
      auth: { username: env.ETCD_USERNAME, password: env.ETCD_PASSWORD },
      timeout: 5_000,
    });
    const giveUpAfter = Number(url.searchParams.get("giveUpAfter") ?? Number.NaN);
    const signal = Number.isNaN(giveUpAfter) ? undefined : AbortSignal.timeout(giveUpAfter);
    try {
      if (url.pathname === "/lock") {
        const lease = url.searchParams.get("lease") ?? "shared";
        const revision = await etcd.withLock(
          url.searchParams.get("name"),
          async (lock) => {
            await new Promise((resolve) => setTimeout(resolve, 20));
            return lock.revision;
          },
          { lease, ttl: Number(url.searchParams.get("ttl") ?? 10), timeout: 10_000, signal },
        );
        return Response.json({ ok: true, revision });
      }
      const { header } = await etcd.put(url.searchParams.get("key"), "written", { signal });
      return Response.json({ ok: true, revision: header.revision });
    } catch (error) {
      if (!isEtcdError(error)) throw error;
      return Response.json({ ok: false, code: error.code, message: error.message }, { status: 503 });
    }
  },
};
