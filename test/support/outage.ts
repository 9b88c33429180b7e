// A fetch that can be cut off: while `down`, every request fails as a dead network does (a TypeError from
// fetch, before anything reaches etcd), so a client sees an outage of every endpoint at once.
import type { Fetch } from "../../src/index.js";

export type SwitchableFetch = Fetch & { down: boolean };

export function switchableFetch(inner: Fetch): SwitchableFetch {
  const fetch = ((input, init) => {
    if (fetch.down) return Promise.reject(new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED") }));
    return inner(input, init);
  }) as SwitchableFetch;
  fetch.down = false;
  return fetch;
}
