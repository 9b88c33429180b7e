// Streams held back (issue 38): a proxy or load balancer between the client and etcd that holds streamed answers
// back until they are complete (nginx's default buffering) turns every watch silent. etcd sends `created` as soon
// as a watch opens; a stream whose first message comes only when it ends was held back. A user's watch and
// `observe()` end with STREAM_HELD_BACK naming the cause and the fix, told once to `onEvent`; the SDK's own waits and
// holdings work on reads through that endpoint meanwhile. Here a fetch that gives each watch answer back whole, at
// its end, stands in for the proxy (test/proxies runs the real ones).
// Tests run side by side (describe.concurrent) to overlap their bounds: each has its own clients and names.
import { describe, expect, it } from "vitest";
import type { EtcdEvent } from "../../src/index.js";
import { rejection, sleep, stillPending, until, within } from "../support/async.js";
import { freshNames, useSessions } from "../support/etcd.js";
import { bufferingFetch } from "../support/outage.js";
import { useBackend } from "./backend.js";

const { backend, etcd } = useBackend();
const newSession = useSessions(etcd, { ttl: 30 });
const fresh = freshNames("held");

function buffered() {
  const events: EtcdEvent[] = [];
  const client = backend.client({ fetch: bufferingFetch(backend.fetch), onEvent: (event) => events.push(event) });
  return { client, events };
}

describe.concurrent("a stream held back whole", () => {
  it("ends etcd.watch() with STREAM_HELD_BACK within two seconds, naming the fixes, told once", async () => {
    const { client, events } = buffered();
    const started = performance.now();
    const error = await rejection(async () => {
      for await (const _ of client.watch({ prefix: fresh() })) {
        // nothing comes
      }
    });
    expect(error.code).toBe("STREAM_HELD_BACK");
    expect(performance.now() - started).toBeLessThan(2_500);
    expect(error.message).toContain("proxy_buffering off");
    expect(error.message).toContain("option http-no-delay");
    // A second watch says so too; onEvent heard it once.
    expect((await rejection(async () => client.watch({ key: fresh() })[Symbol.asyncIterator]().next())).code).toBe(
      "STREAM_HELD_BACK",
    );
    expect(events.filter((e) => e.type === "watch.heldBack")).toHaveLength(1);
  });

  it("ends etcd.watch() with STREAM_HELD_BACK though its consumer took time with what the stream held", async () => {
    const { client } = buffered();
    const key = fresh();
    const { header } = await etcd.put(key, "before the watch");
    const batches = client.watch({ key, startRevision: header.revision })[Symbol.asyncIterator]();
    // The held-back stream carries the put, and its end right behind it: how long the consumer keeps the batch is
    // not how long the stream took to end.
    expect((await within(2_500, "the put", batches.next())).value?.events[0]?.kv.value).toBe("before the watch");
    await sleep(300);
    expect((await rejection(within(2_500, "the end", batches.next()))).code).toBe("STREAM_HELD_BACK");
  });

  it("ends election.observe() with STREAM_HELD_BACK", async () => {
    const { client } = buffered();
    const session = await newSession({}, client);
    const observing = session.election(fresh()).observe()[Symbol.asyncIterator]();
    const error = await rejection(async () => {
      for (;;) await observing.next();
    });
    expect(error.code).toBe("STREAM_HELD_BACK");
  });

  it("a waiter takes the free lock within its bound: it reads instead of watching", async () => {
    const { client } = buffered();
    const name = fresh();
    const holder = await (await newSession()).mutex(name).lock();
    const waiting = (await newSession({}, client)).mutex(name).lock({ timeout: 10_000 });
    // Past the moment it finds its stream held back: it must go on waiting while the holder holds.
    expect(await stillPending(waiting, 2_500)).toBe(true);
    await holder.unlock();
    const released = performance.now();
    const lock = await within(5_000, "the waiter", waiting);
    expect(performance.now() - released).toBeLessThan(1_500);
    await lock.unlock();
  });

  it("a semaphore's waiter is admitted within its bound", async () => {
    const { client } = buffered();
    const name = fresh();
    const holder = await (await newSession()).semaphore(name, { permits: 1 }).acquire();
    const waiting = (await newSession({}, client)).semaphore(name, { permits: 1 }).acquire({ timeout: 10_000 });
    // Past the moment it finds its stream held back: it must go on waiting while the holder holds.
    expect(await stillPending(waiting, 2_500)).toBe(true);
    await holder.release();
    const released = performance.now();
    const permit = await within(5_000, "the waiter", waiting);
    expect(performance.now() - released).toBeLessThan(1_500);
    await permit.release();
  });

  it("a holding in an auto session learns of an outside delete within two seconds: it reads its key", async () => {
    const { client } = buffered();
    // The client learns its streams are held back from a first watch.
    await rejection(async () => client.watch({ key: fresh() })[Symbol.asyncIterator]().next());
    const lock = await (await newSession({ keepAlive: "auto" }, client)).mutex(fresh()).lock();
    await sleep(1_300);
    await etcd.delete(lock.key);
    const deleted = performance.now();
    await until("held turns false", 4_000, () => !lock.held);
    expect(performance.now() - deleted).toBeLessThan(2_000);
    expect((lock.signal.reason as Error).message).toContain("deleted by another client");
  });
});
