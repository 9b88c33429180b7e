// workerd entry (nodejs_compat): each GET /run?prefix=... answers with what channels.mjs observed.
import { observe } from "./channels.mjs";

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/ping") return new Response("pong");
    if (url.pathname !== "/run") return new Response("not found", { status: 404 });
    try {
      const prefix = url.searchParams.get("prefix");
      return Response.json(await observe({ endpoint: env.ETCD_ENDPOINTS, runtime: "workerd", prefix }));
    } catch (error) {
      return Response.json({ runtime: "workerd", error: String(error?.stack ?? error) }, { status: 500 });
    }
  },
};
