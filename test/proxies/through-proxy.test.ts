// Through a reverse proxy (issue 38): nginx, HAProxy and Caddy from Debian's packages, each as a user first writes it
// and as docs/deploying.md recommends, TLS terminated at the proxy, real etcd behind it (test/proxies/global-setup.ts,
// one `proxy-*` project each). What holds through every one of them:
// - a lock's waiter takes a free lock within its bound, and a holding that lasts learns that another client deleted
//   its key within two seconds (a proxy that holds streams back makes them work on reads);
// - a quiet watch renewed below the proxy's read timeout sees a change after it, with no reconnection; through a
//   proxy that holds streams back whole (nginx as first written), `etcd.watch()` and `observe()` end with
//   STREAM_HELD_BACK instead of going silent.
import { inject } from "vitest";
import { describe, expect, it } from "vitest";
import type { EtcdEvent } from "../../src/index.js";
import { rejection, sleep, until, within } from "../support/async.js";
import { freshNames, useSessions } from "../support/etcd.js";
import { holdsStreamsBack, READ_TIMEOUT_S } from "../support/proxies.js";
import { useBackend } from "../conformance/backend.js";

const { backend, etcd } = useBackend();
const newSession = useSessions(etcd, { ttl: 30 });
const fresh = freshNames("proxied");

const holdsBack = holdsStreamsBack(inject("proxy"), inject("proxyConfig"));

// Side by side: each test has its own names, sessions and clients, and most of it is waiting out the read timeout.
describe.concurrent(`through ${inject("proxy")} (${inject("proxyConfig")} configuration)`, () => {
  it("a waiter takes the free lock within 1.5 s of its release", async () => {
    const name = fresh();
    const holder = await (await newSession()).mutex(name).lock();
    const waiting = (await newSession()).mutex(name).lock({ timeout: 20_000 });
    // A hold longer than a stream's life and than the proxy's read timeout.
    await sleep((READ_TIMEOUT_S + 1) * 1_000);
    await holder.unlock();
    const released = performance.now();
    const lock = await within(5_000, "the waiter", waiting);
    expect(performance.now() - released).toBeLessThan(1_500);
    await lock.unlock();
  });

  it("a holding learns within 2 s that another client deleted its key", async () => {
    const lock = await (await newSession({ keepAlive: "auto" })).mutex(fresh()).lock();
    await sleep((READ_TIMEOUT_S + 1) * 1_000);
    expect(lock.held).toBe(true);
    await etcd.delete(lock.key);
    const deleted = performance.now();
    await until("held turns false", 5_000, () => !lock.held);
    expect(performance.now() - deleted).toBeLessThan(2_000);
    expect((lock.signal.reason as Error).message).toContain("deleted by another client");
  });

  it("a quiet watch renewed below the read timeout sees a change after it; a stream held back is named", async () => {
    const events: EtcdEvent[] = [];
    /** When each watch stream was asked for, and each reconnection: how old the stream that ended was. */
    const opened: number[] = [];
    const cutAtAge: number[] = [];
    const client = backend.client({
      fetch: (input, init) => {
        if (input.endsWith("/v3/watch")) opened.push(performance.now());
        return backend.fetch(input, init);
      },
      onEvent: (event) => {
        events.push(event);
        if (event.type === "watch.reconnected") cutAtAge.push(performance.now() - opened.at(-1)!);
      },
    });
    const key = fresh();
    const watching = (async () => {
      for await (const batch of client.watch({ key, idleTimeout: (READ_TIMEOUT_S - 2) * 1_000 })) return batch;
    })();
    if (holdsBack) {
      const error = await rejection(within(3_000, "the held-back watch", watching));
      expect(error.code).toBe("STREAM_HELD_BACK");
      expect(error.message).toContain("proxy_buffering off");
      expect(events.filter((e) => e.type === "watch.heldBack")).toHaveLength(1);
      return;
    }
    await sleep((READ_TIMEOUT_S + 3) * 1_000);
    await etcd.put(key, "after the read timeout");
    const batch = await within(2_000, "the watch's event", watching);
    expect(batch?.events[0]?.kv.value).toBe("after the read timeout");
    // No stream lived to the read timeout: each was renewed before it. Caddy 2.6.2 now and then ends a fresh stream
    // within a tenth of a second of its first message (seen in 2 of 9 CI runs, never through nginx or
    // HAProxy); the watch reopens it from the next revision, and a cut of so young a stream is not the read
    // timeout's. With idleTimeout above the read timeout, this fails (nginx and Caddy as recommended: a cut at 5 s).
    expect(cutAtAge.filter((age) => age >= 1_000)).toEqual([]);
  });

  it("observe() follows a change of leader, or ends with STREAM_HELD_BACK", async () => {
    const name = fresh();
    const leader = (await newSession()).election(name);
    await leader.campaign("first");
    const observed = (await newSession()).election(name).observe()[Symbol.asyncIterator]();
    // The current leader comes from a read; what follows comes on a stream.
    expect((await within(3_000, "the leader", observed.next())).value?.value).toBe("first");
    if (holdsBack) {
      expect((await rejection(within(3_000, "observe", observed.next()))).code).toBe("STREAM_HELD_BACK");
      await leader.resign();
      return;
    }
    await leader.proclaim("second");
    expect((await within(3_000, "the proclamation", observed.next())).value?.value).toBe("second");
    await observed.return?.();
    await leader.resign();
  });
});
