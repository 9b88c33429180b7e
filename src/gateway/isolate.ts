/**
 * Whether the runtime ties I/O to the request that started it: in Cloudflare Workers (workerd) a stream one
 * request opened cannot be read for another and is cancelled when its request ends. Nothing may share a stream
 * there between callers that can serve different requests. Workers name themselves in `navigator.userAgent`.
 */
export function requestScopedIo(): boolean {
  return (globalThis as { navigator?: { userAgent?: unknown } }).navigator?.userAgent === "Cloudflare-Workers";
}
