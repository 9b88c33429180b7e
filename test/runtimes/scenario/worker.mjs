// workerd entry (module syntax, no nodejs_compat): each GET /run?prefix=... runs the shared scenario
// against the endpoints in the ETCD_ENDPOINTS text binding and answers with its JSON line.
import { errorReport, run } from "./script.mjs";

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/ping") return new Response("pong");
    if (url.pathname !== "/run") return new Response("not found", { status: 404 });
    try {
      const result = await run({
        endpoint: env.ETCD_ENDPOINTS,
        runtime: "workerd",
        prefix: url.searchParams.get("prefix"),
      });
      return Response.json({ ...result, engine: navigator.userAgent });
    } catch (error) {
      return Response.json(errorReport("workerd", error), { status: 500 });
    }
  },
};
