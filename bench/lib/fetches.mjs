// The two fetch implementations every etcd-edge contender runs with, and a wrapper that counts requests.
import { createNodeFetch } from "etcd-edge/node";
import { bounded } from "./bounded.mjs";

export const FETCH_KINDS = ["global", "node"];
export const FETCH_LABEL = { global: "global fetch", node: "etcd-edge/node" };
/** How a row names an etcd-edge contender running on that fetch. */
export const EDGE_LABEL = { global: "etcd-edge, global fetch", node: "etcd-edge, createNodeFetch()" };

/**
 * A fetch of the given kind. `sdk` is what goes into `new Etcd({ fetch })` (undefined for the global
 * fetch: the SDK then looks it up itself, as a user's client does); `send` is the same fetch for
 * hand-written requests; `close()` never waits more than a few seconds (a wedged pool must not stall
 * the bench).
 */
export function openFetch(kind, options) {
  if (kind === "global") {
    return { kind, sdk: undefined, send: (url, init) => globalThis.fetch(url, init), close: async () => {} };
  }
  const fetch = createNodeFetch(options);
  return { kind, sdk: fetch, send: fetch, close: () => bounded(fetch.close(), 3_000) };
}

/** Wraps a fetch (undefined: the global one, looked up per call) and counts requests by gateway path. */
export function countingFetch(inner) {
  const counts = new Map();
  const fetch = (url, init) => {
    const path = url.slice(url.indexOf("/v3/"));
    counts.set(path, (counts.get(path) ?? 0) + 1);
    return (inner ?? globalThis.fetch)(url, init);
  };
  fetch.counts = counts;
  fetch.total = () => [...counts.values()].reduce((a, b) => a + b, 0);
  fetch.reset = () => counts.clear();
  return fetch;
}
