// workerd entry (module syntax, no nodejs_compat): one client per isolate with auth on, shared by its requests.
// GET /put?key=...&giveUpAfter=ms writes the key; with giveUpAfter the call is aborted after that many ms, so the
// request can end while the authenticate it started is still unanswered.
import { Etcd, isEtcdError } from "etcd-edge";

let etcd;

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/ping") return new Response("pong");
    if (url.pathname !== "/put") return new Response("not found", { status: 404 });
    etcd ??= new Etcd({
      endpoints: [env.ETCD_ENDPOINTS],
      auth: { username: env.ETCD_USERNAME, password: env.ETCD_PASSWORD },
      timeout: 5_000,
    });
    const giveUpAfter = Number(url.searchParams.get("giveUpAfter") ?? Number.NaN);
    const signal = Number.isNaN(giveUpAfter) ? undefined : AbortSignal.timeout(giveUpAfter);
    try {
      const { header } = await etcd.put(url.searchParams.get("key"), "written", { signal });
      return Response.json({ ok: true, revision: header.revision });
    } catch (error) {
      if (!isEtcdError(error)) throw error;
      return Response.json({ ok: false, code: error.code, message: error.message }, { status: 503 });
    }
  },
};
