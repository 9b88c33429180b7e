import { http, type HttpHandler } from "msw";

/** The only module that imports msw: one catch-all handler per base URL, so 404/405 match the real gateway too. */
export function mswHandlers(baseUrl: string, handle: (request: Request) => Promise<Response>): HttpHandler[] {
  const base = baseUrl.replace(/\/+$/, "");
  return [http.all(`${base}/*`, ({ request }) => handle(request))];
}
