// workerd entry (nodejs_compat): each GET /run?prefix=...&cutting=... answers with what channels.mjs observed.
import { observe } from "./channels.mjs";

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/ping") return new Response("pong");
    if (url.pathname !== "/run") return new Response("not found", { status: 404 });
    try {
      const [prefix, cutting] = [url.searchParams.get("prefix"), url.searchParams.get("cutting")];
      return Response.json(await observe({ endpoint: env.ETCD_ENDPOINTS, runtime: "workerd", prefix, cutting }));
    } catch (error) {
      return Response.json({ runtime: "workerd", error: String(error?.stack ?? error) }, { status: 500 });
    }
  },
};
