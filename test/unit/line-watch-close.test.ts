// A client's line stream (src/lock/line/line-watch.ts) through its life, on the in-memory gateway with the clock
// faked. It closes LINGER_MS after its last user left (though it had begun to linger before that user came; not
// after the first of several), never while a holding follows a key in the line, and once a wait given up by its
// signal alone has left; a line once closed is forgotten, and a second leave or unfollow counts for nothing. While
// open, it leaves no listener on a cancelled wait's signal, reads a holding's key once (not at each renewal) and
// nothing for waiters alone, and opens once for holdings that come together; behind a buffering proxy, one poll
// serves the line's holdings and ends with them; refused, it is opened again after growing pauses while followed.
import { getEventListeners } from "node:events";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Etcd } from "../../src/index.js";
import { enterLine, followKey, type LineStream } from "../../src/lock/line/line-watch.js";
import { badRequest } from "../support/gateway.js";
import { failWhere, isWatch, MOCK_ENDPOINT, mockClient } from "../support/mock.js";

const LINGER_MS = 250;
const never = new AbortController().signal;

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
});
afterEach(() => {
  vi.useRealTimers();
});

/** The line's open stream, as a waiter that comes now finds it (undefined once it closed). */
function openStream(etcd: Etcd, key: string): LineStream | undefined {
  const waiter = enterLine(etcd, key);
  const stream = waiter.sharedWatch();
  waiter.leave();
  return stream;
}

/** Opens the line's stream as a client's second waiter does, and lets both leave at once. */
async function opened(etcd: Etcd, key: string): Promise<LineStream> {
  const first = enterLine(etcd, key);
  const second = enterLine(etcd, key);
  const stream = second.sharedWatch()!;
  first.leave();
  second.leave();
  await vi.advanceTimersByTimeAsync(0);
  expect(stream.created).toBe(true);
  return stream;
}

describe("a line's stream closes", () => {
  it(`${LINGER_MS} ms after its last user left, though it had begun to linger before that user came`, async () => {
    const { etcd } = mockClient();
    const stream = await opened(etcd, "line/x");
    await vi.advanceTimersByTimeAsync(150);
    const wait = stream.waitForDelete({ key: "line/a", createRevision: 1 }, 0, never);
    await vi.advanceTimersByTimeAsync(50);
    wait.cancel();
    // Nobody used it for 150 ms, then its last user left 100 ms ago: open.
    await vi.advanceTimersByTimeAsync(100);
    expect(openStream(etcd, "line/x")).toBe(stream);
    await vi.advanceTimersByTimeAsync(LINGER_MS);
    expect(openStream(etcd, "line/x")).toBeUndefined();
  });

  it(`${LINGER_MS} ms after the last of its users left, not after the first`, async () => {
    const { etcd } = mockClient();
    const stream = await opened(etcd, "line/x");
    const one = stream.waitForDelete({ key: "line/a", createRevision: 1 }, 0, never);
    const two = stream.waitForDelete({ key: "line/b", createRevision: 1 }, 0, never);
    await vi.advanceTimersByTimeAsync(50);
    one.cancel();
    await vi.advanceTimersByTimeAsync(200);
    two.cancel();
    // The first user left 300 ms ago, the last 100 ms ago: open.
    await vi.advanceTimersByTimeAsync(100);
    expect(openStream(etcd, "line/x")).toBe(stream);
    await vi.advanceTimersByTimeAsync(LINGER_MS);
    expect(openStream(etcd, "line/x")).toBeUndefined();
  });

  it("never while a holding follows a key in it; LINGER_MS after the last of a key's holdings stops", async () => {
    const { etcd } = mockClient();
    await etcd.put("line/held", "v");
    const told: Array<string | undefined> = [];
    const one = followKey(etcd, { key: "line/held", seen: (kv) => told.push(`one ${kv?.value}`) });
    const two = followKey(etcd, { key: "line/held", seen: (kv) => told.push(`two ${kv?.value}`) });
    await vi.advanceTimersByTimeAsync(2 * LINGER_MS);
    const stream = openStream(etcd, "line/x");
    expect(stream?.created).toBe(true);
    // Each read its key once as the stream was created; from here on the stream tells both.
    expect(told.sort()).toEqual(["one v", "two v"]);
    told.length = 0;
    await etcd.put("line/held", "u");
    await vi.advanceTimersByTimeAsync(0);
    expect(told).toEqual(["one u", "two u"]);
    // One of the key's two holdings stops: the other is still told what happens to the key.
    one();
    await vi.advanceTimersByTimeAsync(2 * LINGER_MS);
    expect(openStream(etcd, "line/x")).toBe(stream);
    told.length = 0;
    await etcd.put("line/held", "w");
    await vi.advanceTimersByTimeAsync(0);
    expect(told).toEqual(["two w"]);
    two();
    await vi.advanceTimersByTimeAsync(LINGER_MS - 50);
    expect(openStream(etcd, "line/x")).toBe(stream);
    await vi.advanceTimersByTimeAsync(100);
    expect(openStream(etcd, "line/x")).toBeUndefined();
  });

  it("and the line is forgotten: a holding's second unfollow then leaves the line's next stream alone", async () => {
    const { etcd } = mockClient();
    await etcd.put("line/a", "v");
    const unfollow = followKey(etcd, { key: "line/a", seen: () => {} });
    await vi.advanceTimersByTimeAsync(0);
    unfollow();
    await vi.advanceTimersByTimeAsync(2 * LINGER_MS);
    expect(openStream(etcd, "line/x")).toBeUndefined();
    // The same key held again, by a holding of its own.
    const told: Array<string | undefined> = [];
    const next = followKey(etcd, { key: "line/a", seen: (kv) => told.push(kv?.value) });
    await vi.advanceTimersByTimeAsync(0);
    const stream = openStream(etcd, "line/x");
    expect(stream?.created).toBe(true);
    unfollow();
    // The client still has one stream for the line, its waiters find it, and the new holding is still told.
    expect(openStream(etcd, "line/x")).toBe(stream);
    await vi.advanceTimersByTimeAsync(2 * LINGER_MS);
    expect(openStream(etcd, "line/x")).toBe(stream);
    told.length = 0;
    await etcd.put("line/a", "w");
    await vi.advanceTimersByTimeAsync(0);
    expect(told).toEqual(["w"]);
    next();
  });

  it("not, nor is the line forgotten, when one waiter leaves while another is in it", async () => {
    const { etcd, calls } = mockClient();
    const first = enterLine(etcd, "line/a");
    const passing = enterLine(etcd, "line/b");
    passing.leave();
    // The client's next waiter is its second in the line: it opens the line's stream.
    const second = enterLine(etcd, "line/c");
    const stream = second.sharedWatch();
    expect(stream).toBeDefined();
    await vi.advanceTimersByTimeAsync(0);
    expect(calls.filter(isWatch)).toHaveLength(1);
    first.leave();
    second.leave();
  });

  it("nor for a waiter's second leave or a holding's second unfollow: each counts once", async () => {
    const { etcd } = mockClient();
    await etcd.put("line/held", "v");
    const first = enterLine(etcd, "line/a");
    const twice = enterLine(etcd, "line/b");
    twice.leave();
    twice.leave();
    const second = enterLine(etcd, "line/c");
    const stream = second.sharedWatch();
    expect(stream).toBeDefined();
    const earlier = followKey(etcd, { key: "line/held", seen: () => {} });
    earlier();
    // The key held again in the same line: the earlier holding's second unfollow must not stop this one's news.
    const told: Array<string | undefined> = [];
    const later = followKey(etcd, { key: "line/held", seen: (kv) => told.push(kv?.value) });
    earlier();
    await vi.advanceTimersByTimeAsync(0);
    told.length = 0;
    await etcd.put("line/held", "w");
    await vi.advanceTimersByTimeAsync(0);
    expect(told).toEqual(["w"]);
    first.leave();
    second.leave();
    later();
  });

  it("once a wait given up by its signal alone (never cancelled) has left it", async () => {
    const { etcd } = mockClient();
    const stream = await opened(etcd, "line/x");
    const controller = new AbortController();
    const wait = stream.waitForDelete({ key: "line/a", createRevision: 1 }, 0, controller.signal);
    await vi.advanceTimersByTimeAsync(2 * LINGER_MS);
    expect(openStream(etcd, "line/x")).toBe(stream);
    controller.abort();
    await expect(wait.deleted).rejects.toMatchObject({ code: "ABORTED" });
    await vi.advanceTimersByTimeAsync(LINGER_MS + 50);
    expect(openStream(etcd, "line/x")).toBeUndefined();
  });
});

describe("a line's stream, while open", () => {
  it("leaves no listener on a wait's signal once the wait is cancelled (a session's signal lives long)", async () => {
    const { etcd } = mockClient();
    const stream = await opened(etcd, "line/x");
    const session = new AbortController();
    const wait = stream.waitForDelete({ key: "line/a", createRevision: 1 }, 0, session.signal);
    expect(getEventListeners(session.signal, "abort")).toHaveLength(1);
    wait.cancel();
    expect(getEventListeners(session.signal, "abort")).toHaveLength(0);
  });

  it("reads a holding's key once, when first created, not again at each of its renewals", async () => {
    const { etcd, calls } = mockClient();
    await etcd.put("line/held", "v");
    const told: Array<string | undefined> = [];
    const unfollow = followKey(etcd, { key: "line/held", seen: (kv) => told.push(kv?.value) });
    await vi.advanceTimersByTimeAsync(4_000);
    // Renewed meanwhile: each stream lives a second.
    expect(calls.filter(isWatch).length).toBeGreaterThan(2);
    expect(calls.filter((path) => path === "/v3/kv/txn")).toHaveLength(1);
    expect(told).toEqual(["v"]);
    unfollow();
  });

  it("reads nothing when created for waiters alone, and opens once for two holdings that follow at once", async () => {
    const { etcd, calls } = mockClient();
    await opened(etcd, "line/x");
    expect(calls).toEqual(["/v3/watch"]);
    const other = mockClient();
    const one = followKey(other.etcd, { key: "line/a", seen: () => {} });
    const two = followKey(other.etcd, { key: "line/b", seen: () => {} });
    await vi.advanceTimersByTimeAsync(0);
    expect(other.calls.filter(isWatch)).toHaveLength(1);
    // Both keys read in one request once the stream is created, not one more for the holding that came second.
    expect(other.calls.filter((path) => path === "/v3/kv/txn")).toHaveLength(1);
    one();
    two();
  });

  it("is replaced by one poll of the line's holdings while streams come back held back, however many", async () => {
    const { etcd, calls } = mockClient();
    await etcd.put("line/held", "v");
    etcd.transport.streamHeldBack(MOCK_ENDPOINT);
    const reads = () => calls.filter((path) => path === "/v3/kv/txn").length;
    const told: Array<string | undefined> = [];
    const one = followKey(etcd, { key: "line/held", seen: (kv) => told.push(kv?.value) });
    await etcd.delete({ key: "line/held" });
    await vi.advanceTimersByTimeAsync(500);
    // A second holding in the line joins the same reads: one poll for the line, not one each.
    const two = followKey(etcd, { key: "line/other", seen: () => {} });
    await vi.advanceTimersByTimeAsync(500);
    expect(reads()).toBe(1);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(reads()).toBe(2);
    // Each poll, a poll's interval apart, told the holding its key is gone.
    expect(told).toEqual([undefined, undefined]);
    one();
    two();
    // Nobody follows: the loop ends, no read and no timer after it.
    await vi.advanceTimersByTimeAsync(3_000);
    expect(reads()).toBe(2);
    expect(vi.getTimerCount()).toBe(0);
    expect(calls).not.toContain("/v3/watch");
  });

  it("is opened again after growing pauses while refused, for as long as a holding follows and no longer", async () => {
    // Refused with an error no reconnection mends (not a permission, which stops it for good).
    const { etcd, calls } = mockClient({}, { through: failWhere(isWatch, () => true, badRequest) });
    const watches = () => calls.filter(isWatch).length;
    const unfollow = followKey(etcd, { key: "line/held", seen: () => {} });
    await vi.advanceTimersByTimeAsync(10_000);
    // Pauses from 50 ms doubling to 2 s (full jitter): a few dozen at most in 10 s, never a loop.
    expect(watches()).toBeGreaterThan(3);
    expect(watches()).toBeLessThan(40);
    unfollow();
    const after = watches();
    await vi.advanceTimersByTimeAsync(5_000);
    expect(watches()).toBe(after);
    expect(vi.getTimerCount()).toBe(0);
  });
});
