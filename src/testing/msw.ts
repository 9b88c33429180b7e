import { http, type HttpHandler } from "msw";
import type { MockEtcd } from "./mock.js";

/**
 * `etcd-edge/testing/msw`: msw handlers that answer every request under `baseUrl` (e.g.
 * "http://etcd.test:2379") from `mock`: `setupServer(...mswHandlers(mock, baseUrl))`. One catch-all handler, so
 * unknown paths and wrong methods get the gateway's own 404 and 405 too. The only module that imports msw.
 */
export function mswHandlers(mock: MockEtcd, baseUrl: string): HttpHandler[] {
  const base = baseUrl.replace(/\/+$/, "");
  return [http.all(`${base}/*`, ({ request }) => mock.handle(request))];
}
