// A fetch that can be cut off: while `down`, every request fails as a dead network does (a TypeError from
// fetch, before anything reaches etcd), so a client sees an outage of every endpoint at once.
import type { Fetch } from "../../src/index.js";

export type SwitchableFetch = Fetch & { down: boolean };

/**
 * `breakStreams`: going down also breaks the watch streams open through it, as a dead network does to a
 * connection in use; without it they carry on, as a stream already open through a proxy that went down may.
 */
export function switchableFetch(inner: Fetch, { breakStreams = false } = {}): SwitchableFetch {
  let down = false;
  /** Breaks one stream open through it. */
  const open = new Set<() => void>();
  const fetch = (async (input, init) => {
    if (down) throw new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED") });
    const response = await inner(input, init);
    if (!breakStreams || !input.endsWith("/v3/watch") || response.body === null) return response;
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    let breaker = () => {};
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        breaker = () => {
          controller.error(new TypeError("terminated", { cause: new Error("other side closed") }));
          reader.cancel().catch(() => {});
        };
        open.add(breaker);
      },
      async pull(controller) {
        const { done, value } = await reader.read().catch((error: unknown) => {
          open.delete(breaker);
          throw error;
        });
        if (!done) return controller.enqueue(value);
        open.delete(breaker);
        controller.close();
      },
      cancel(reason) {
        open.delete(breaker);
        return reader.cancel(reason);
      },
    });
    return new Response(body, { status: response.status, headers: (response as { headers?: HeadersInit }).headers });
  }) as SwitchableFetch;
  Object.defineProperty(fetch, "down", {
    get: () => down,
    set(value: boolean) {
      down = value;
      if (!value) return;
      for (const breaker of open) breaker();
      open.clear();
    },
  });
  return fetch;
}

/**
 * A fetch that loses the answer to the next request `lose` picks: the request reaches etcd and is applied, and
 * the client sees the network fail, as when a connection drops after the server answered.
 */
export function answerLosingFetch(
  inner: Fetch,
  lose: (path: string, body: string) => boolean,
): Fetch & { lost: number } {
  const fetch = (async (input, init) => {
    const pick = fetch.lost === 0 && lose(new URL(input).pathname, String(init?.body ?? ""));
    const response = await inner(input, init);
    if (!pick) return response;
    fetch.lost++;
    await response.text();
    throw new TypeError("fetch failed", { cause: new Error("socket hang up") });
  }) as Fetch & { lost: number };
  fetch.lost = 0;
  return fetch;
}

/**
 * A fetch whose watch streams deliver nothing between `hold()` and `resume()`; other requests pass untouched: a
 * stream stalled in a proxy or a paused member, while unary answers still come.
 */
export function heldWatches(inner: Fetch): { fetch: Fetch; hold(): void; resume(): void } {
  const gate = new Gate();
  const fetch: Fetch = async (url, init) => {
    const response = await inner(url, init);
    if (!url.endsWith("/v3/watch") || response.body === null) return response;
    return gated(response, gate);
  };
  return { fetch, hold: () => gate.hold(), resume: () => gate.open() };
}

/**
 * A fetch whose watch answers come back whole, only once the stream ends (headers included): what nginx does with
 * its default `proxy_buffering on`. Other requests pass untouched.
 */
export function bufferingFetch(inner: Fetch): Fetch {
  return async (url, init) => {
    const response = await inner(url, init);
    if (!url.endsWith("/v3/watch") || response.body === null) return response;
    const whole = await new Response(response.body as ReadableStream<Uint8Array>).text();
    return new Response(whole, { status: response.status, headers: (response as { headers?: HeadersInit }).headers });
  };
}

/** What `stallingEndpoints` gives: a client's two endpoints, the first of which can stall. */
export interface StallingEndpoints {
  readonly fetch: Fetch;
  /** The endpoint that stalls first in the list, the one that keeps answering second. */
  readonly endpoints: readonly [stalls: string, answers: string];
  stall(): void;
  resume(): void;
}

/**
 * Two endpoints in front of one store (`target`), the first of which can stall as a paused member does (SIGSTOP):
 * its connections stay open, a request sent to it is never answered (until its signal aborts it) and the
 * streams open through it deliver nothing more, while the second answers as ever. `resume()` lets what the
 * first held go on.
 */
export function stallingEndpoints(inner: Fetch, target: string): StallingEndpoints {
  const endpoints = ["http://stalls.test:2379", "http://answers.test:2379"] as const;
  // Closed while the first endpoint stalls.
  const gate = new Gate();
  const fetch: Fetch = async (input, init) => {
    const url = new URL(input);
    const stalls = url.origin === endpoints[0];
    if (stalls) await gate.passing(init.signal);
    const response = await inner(new URL(url.pathname + url.search, target).href, init);
    if (!stalls || !url.pathname.endsWith("/watch") || response.body === null) return response;
    return gated(response, gate);
  };
  return { fetch, endpoints, stall: () => gate.hold(), resume: () => gate.open() };
}

/** Holds whoever passes while closed: `hold()` closes it, `open()` lets everyone it held go on. */
class Gate {
  #closed: Promise<void> | undefined;
  #open = () => {};

  hold(): void {
    this.#closed ??= new Promise((resolve) => (this.#open = resolve));
  }

  open(): void {
    this.#closed = undefined;
    this.#open();
  }

  /** Nothing while open; else settles once opened, or rejects first when `signal` aborts. */
  passing(signal?: AbortSignal | null): Promise<void> | undefined {
    const closed = this.#closed;
    if (closed === undefined) return undefined;
    return new Promise<void>((resolve, reject) => {
      signal?.throwIfAborted();
      signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
      closed.then(resolve);
    });
  }
}

/** `response` again, each chunk of its body passed on only once `gate` lets it. */
function gated(response: Awaited<ReturnType<Fetch>>, gate: Gate): Response {
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read();
      await gate.passing();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel: (reason) => reader.cancel(reason),
  });
  return new Response(body, { status: response.status, headers: (response as { headers?: HeadersInit }).headers });
}
