// A client's watch of one line (src/lock/line/line-watch.ts), shared by its waiters and its holdings there, on the
// in-memory gateway: none for a waiter alone in its client, one stream per line and client once a second waiter
// comes or a holding follows its key, a delete delivered before a waiter subscribed found in the recent history
// (no read), a read asked for once that history no longer covers the waiter's read, the stream closed once nobody
// is left, an older incarnation's delete never taken for the one a waiter saw, and a key a waiter found first
// passed on to the waiter behind it; a stream refused for good fails its waiters at once, and a holding's is opened
// again.
import { describe, expect, it } from "vitest";
import type { Etcd } from "../../src/index.js";
import { enterLine, followKey, type LineStream } from "../../src/lock/line/line-watch.js";
import { sleep, until } from "../support/async.js";
import { badRequest, permissionDenied } from "../support/gateway.js";
import { failWhere, isWatch, mockClient } from "../support/mock.js";

const never = new AbortController().signal;

/** A key as a waiter saw it; the create revision matters only where a test marks a key first. */
const seen = (key: string, createRevision = 1) => ({ key, createRevision });

/** The line's shared watch, opened as a client's second waiter in the line opens it. */
function shared(etcd: Etcd, key: string): LineStream {
  const first = enterLine(etcd, key);
  const second = enterLine(etcd, key);
  const watch = second.sharedWatch()!;
  first.leave();
  second.leave();
  return watch;
}

/**
 * What a new wait on `stream` is told within 50 ms: ABORTED once the stream has closed (a closed stream refuses a
 * wait at once), "still open" while it waits on.
 */
async function stateOf(stream: LineStream): Promise<string> {
  const outcome = stream.waitForDelete(seen("line/none"), 0, never).deleted.then(
    () => "woken",
    (error: { code: string }) => error.code,
  );
  return Promise.race([outcome, sleep(50).then(() => "still open")]);
}

/** Opens the line's watch and waits until it is created. */
async function created(etcd: Etcd, key: string): Promise<LineStream> {
  const watch = shared(etcd, key);
  const first = watch.waitForDelete(seen(key), 0, never);
  await first.gap;
  first.cancel();
  return watch;
}

describe("a line's watch", () => {
  it("is not opened for a waiter alone in its client: that one watches its predecessor's key alone", () => {
    const { etcd, calls } = mockClient();
    const alone = enterLine(etcd, "line/a");
    expect(alone.sharedWatch()).toBeUndefined();
    alone.leave();
    expect(calls.filter(isWatch)).toHaveLength(0);
  });

  it("serves every waiter of the line on one stream, and each only its own key's delete", async () => {
    const { etcd, calls } = mockClient();
    for (const k of ["a", "b", "c"]) await etcd.put(`line/${k}`, k);
    const read = (await etcd.range({ prefix: "line/" })).header.revision;
    const watch = shared(etcd, "line/a");
    const onA = watch.waitForDelete(seen("line/a"), read, never);
    // While the stream is open, a waiter that comes alone uses it too.
    const later = enterLine(etcd, "line/b");
    expect(later.sharedWatch()).toBe(watch);
    later.leave();
    const onB = watch.waitForDelete(seen("line/b"), read, never);
    expect(await onA.gap).toBe(false);
    const deletedB = await etcd.delete({ key: "line/b" });
    expect((await onB.deleted).header.revision).toBe(deletedB.header.revision);
    expect(await Promise.race([onA.deleted.then(() => "deleted"), sleep(50).then(() => "waiting")])).toBe("waiting");
    onA.cancel();
    expect(calls.filter(isWatch)).toHaveLength(1);
  });

  it("a delete that went by between a waiter's read and its subscription is found without a read", async () => {
    const { etcd } = mockClient();
    await etcd.put("line/a", "a");
    const watch = await created(etcd, "line/x");
    const read = (await etcd.range({ prefix: "line/" })).header.revision;
    const gone = await etcd.delete({ key: "line/a" });
    await sleep(20);
    const late = watch.waitForDelete(seen("line/a"), read, never);
    expect(await late.gap).toBe(false);
    expect((await late.deleted).header.revision).toBe(gone.header.revision);
  });

  it("asks for one read when the deletes since the waiter's read are no longer all remembered", async () => {
    const { etcd } = mockClient();
    const watch = await created(etcd, "line/x");
    const read = (await etcd.range({ prefix: "line/" })).header.revision;
    // Waiting for the last delete keeps the stream open (it closes soon after its last waiter leaves) and
    // shows when the stream has delivered all of them, however slow the machine.
    const last = watch.waitForDelete(seen("line/69"), read, never);
    for (let i = 0; i < 70; i++) {
      await etcd.put(`line/${i}`, "v");
      await etcd.delete({ key: `line/${i}` });
    }
    await last.deleted;
    const late = watch.waitForDelete(seen("line/p"), read, never);
    expect(await late.gap).toBe(true);
    late.cancel();
  });

  it("asks for no read while every delete since the waiter's read is remembered, 64 of them at most", async () => {
    const { etcd } = mockClient();
    const watch = await created(etcd, "line/x");
    const read = (await etcd.range({ prefix: "line/" })).header.revision;
    // Subscribed at the revision the stream is at: nothing went by.
    const now = watch.waitForDelete(seen("line/p"), read, never);
    expect(await now.gap).toBe(false);
    for (let i = 0; i < 64; i++) await etcd.put(`line/${i}`, "v");
    const last = watch.waitForDelete(seen("line/63"), read, never);
    for (let i = 0; i < 64; i++) await etcd.delete({ key: `line/${i}` });
    await last.deleted;
    // 64 deletes of other keys went by since the read: all remembered, none is the one waited for.
    const late = watch.waitForDelete(seen("line/p"), read, never);
    expect(await late.gap).toBe(false);
    now.cancel();
    late.cancel();
  });

  it("wakes every waiter of the client that waits for the same key", async () => {
    const { etcd } = mockClient();
    await etcd.put("line/a", "a");
    const read = (await etcd.range({ prefix: "line/" })).header.revision;
    const watch = shared(etcd, "line/a");
    const one = watch.waitForDelete(seen("line/a"), read, never);
    const two = watch.waitForDelete(seen("line/a"), read, never);
    const gone = await etcd.delete({ key: "line/a" });
    expect((await one.deleted).header.revision).toBe(gone.header.revision);
    expect((await two.deleted).header.revision).toBe(gone.header.revision);
  });

  it("opens on a member slow to answer its watch (well within a stream's life): one request", async () => {
    const { etcd, calls } = mockClient(
      {},
      {
        through: async (input, init, forward) => {
          if (isWatch(input)) await sleep(50);
          return forward(input, init);
        },
      },
    );
    const watch = await created(etcd, "line/x");
    expect(watch.created).toBe(true);
    expect(calls.filter(isWatch)).toHaveLength(1);
  });

  it("closes its stream soon after the last waiter leaves; the next waiter opens a new one", async () => {
    const { etcd, calls } = mockClient();
    await created(etcd, "line/x");
    await sleep(400);
    await created(etcd, "line/x");
    expect(calls.filter(isWatch)).toHaveLength(2);
  });

  it("an abandoned wait rejects with ABORTED and leaves the others waiting", async () => {
    const { etcd } = mockClient();
    await etcd.put("line/a", "a");
    const read = (await etcd.range({ prefix: "line/" })).header.revision;
    const controller = new AbortController();
    const watch = shared(etcd, "line/a");
    const left = watch.waitForDelete(seen("line/a"), read, controller.signal);
    const stays = watch.waitForDelete(seen("line/a"), read, never);
    controller.abort();
    await expect(left.deleted).rejects.toMatchObject({ code: "ABORTED" });
    await etcd.delete({ key: "line/a" });
    await expect(stays.deleted).resolves.toBeDefined();
  });

  it("a delete of an older incarnation than the one the waiter's read showed does not wake it", async () => {
    const { etcd } = mockClient();
    const watch = await created(etcd, "line/x");
    // The waiter's read ran ahead of the stream: it showed line/a created again at base + 3, and the delete
    // of the older incarnation (base + 2) reaches the stream only after the waiter subscribed.
    const base = (await etcd.range({ prefix: "line/" })).header.revision;
    const wait = watch.waitForDelete(seen("line/a", base + 3), base + 3, never);
    await etcd.put("line/a", "old");
    await etcd.delete({ key: "line/a" });
    expect((await etcd.put("line/a", "new")).header.revision).toBe(base + 3);
    expect(await Promise.race([wait.deleted.then(() => "woken"), sleep(50).then(() => "waiting")])).toBe("waiting");
    const gone = await etcd.delete({ key: "line/a" });
    expect((await wait.deleted).header.revision).toBe(gone.header.revision);
  });

  it("tells the waiter behind a key found first that it was first, and only for that incarnation", async () => {
    const { etcd } = mockClient();
    const watch = await created(etcd, "line/x");
    const a = (await etcd.put("line/a", "a")).header.revision;
    const read = (await etcd.range({ prefix: "line/" })).header.revision;
    const behind = watch.waitForDelete(seen("line/a", a), read, never);
    watch.markFirst(seen("line/a", a));
    await etcd.delete({ key: "line/a" });
    expect((await behind.deleted).wasFirst).toBe(true);
    // The mark left with that incarnation: the next one is not known first.
    const again = (await etcd.put("line/a", "a")).header.revision;
    const next = watch.waitForDelete(seen("line/a", again), again, never);
    await etcd.delete({ key: "line/a" });
    expect((await next.deleted).wasFirst).toBe(false);
    // A mark for another incarnation than the one the waiter saw says nothing about it.
    const third = (await etcd.put("line/a", "a")).header.revision;
    const other = watch.waitForDelete(seen("line/a", third), third, never);
    watch.markFirst(seen("line/a", third - 1));
    await etcd.delete({ key: "line/a" });
    expect((await other.deleted).wasFirst).toBe(false);
  });

  it("remembers in its recent history whether a delete was of the first key", async () => {
    const { etcd } = mockClient();
    const watch = await created(etcd, "line/x");
    const a = (await etcd.put("line/a", "a")).header.revision;
    const read = (await etcd.range({ prefix: "line/" })).header.revision;
    watch.markFirst(seen("line/a", a));
    await etcd.delete({ key: "line/a" });
    await sleep(20);
    const late = watch.waitForDelete(seen("line/a", a), read, never);
    expect(await late.gap).toBe(false);
    expect((await late.deleted).wasFirst).toBe(true);
  });

  it("finds in its history only the delete of the key waited for, first only for the incarnation marked", async () => {
    const { etcd } = mockClient();
    const watch = await created(etcd, "line/x");
    const a = (await etcd.put("line/a", "a")).header.revision;
    const b = (await etcd.put("line/b", "b")).header.revision;
    await etcd.put("line/c", "c");
    const read = (await etcd.range({ prefix: "line/" })).header.revision;
    // Marked first as another incarnation of line/a than the one the waiter behind it saw (a read ran ahead).
    watch.markFirst(seen("line/a", a - 1));
    await etcd.delete({ key: "line/b" });
    await etcd.delete({ key: "line/a" });
    await sleep(20);
    // Each waiter would hold at once on `wasFirst`: only the mark of the very incarnation it saw may say so.
    const behindA = watch.waitForDelete(seen("line/a", a), read, never);
    const behindB = watch.waitForDelete(seen("line/b", b), read, never);
    expect(await behindA.gap).toBe(false);
    expect((await behindA.deleted).wasFirst).toBe(false);
    expect((await behindB.deleted).wasFirst).toBe(false);
    // line/c is still there: the deletes of other keys since the read do not wake its waiter.
    const behindC = watch.waitForDelete(seen("line/c"), read, never);
    expect(await Promise.race([behindC.deleted.then(() => "woken"), sleep(50).then(() => "waiting")])).toBe("waiting");
    behindC.cancel();
  });

  it("keeps a key marked first while other keys of the line are deleted, until its own delete", async () => {
    const { etcd } = mockClient();
    const watch = await created(etcd, "line/x");
    const a = (await etcd.put("line/a", "a")).header.revision;
    await etcd.put("line/b", "b");
    const read = (await etcd.range({ prefix: "line/" })).header.revision;
    const behind = watch.waitForDelete(seen("line/a", a), read, never);
    watch.markFirst(seen("line/a", a));
    // A waiter behind line/b gave up and left: its delete must not take the mark from line/a.
    await etcd.delete({ key: "line/b" });
    await sleep(20);
    await etcd.delete({ key: "line/a" });
    expect((await behind.deleted).wasFirst).toBe(true);
  });

  it("a stream refused for good fails its waiters with the refusal at once: each reads on its own", async () => {
    const { etcd } = mockClient({}, { through: failWhere(isWatch, () => true, permissionDenied) });
    await etcd.put("line/a", "a");
    const read = (await etcd.range({ prefix: "line/" })).header.revision;
    const watch = shared(etcd, "line/a");
    const wait = watch.waitForDelete(seen("line/a"), read, never);
    await expect(wait.deleted).rejects.toMatchObject({ code: "PERMISSION_DENIED" });
    await expect(wait.gap).rejects.toMatchObject({ code: "PERMISSION_DENIED" });
    // A waiter that comes after the failure is told at once too.
    const late = watch.waitForDelete(seen("line/a"), read, never);
    await expect(late.deleted).rejects.toMatchObject({ code: "PERMISSION_DENIED" });
  });

  it("a holding's stream failed for good is opened again while it follows; it reads its key once created", async () => {
    let refusals = 1;
    // The first stream is refused with an error no reconnection mends (not a permission, which stops it).
    const { etcd, calls } = mockClient({}, { through: failWhere(isWatch, () => refusals-- > 0, badRequest) });
    await etcd.put("line/held", "v");
    const seenKvs: Array<string | undefined> = [];
    const unfollow = followKey(etcd, { key: "line/held", seen: (kv) => seenKvs.push(kv?.value) });
    // Taken over by another client meanwhile: the holding learns it from the reopened stream's first read.
    await etcd.put("line/held", "theirs");
    await until("the stream opened again and its first read", 5_000, async () => seenKvs.length > 0);
    expect(calls.filter(isWatch)).toHaveLength(2);
    expect(seenKvs).toEqual(["theirs"]);
    await etcd.delete({ key: "line/held" });
    await sleep(20);
    expect(seenKvs).toEqual(["theirs", undefined]);
    unfollow();
  });

  it("a holding that joins an open stream reads its key once: a change before it joined is not missed", async () => {
    const { etcd } = mockClient();
    await etcd.put("line/held", "v");
    const opener = followKey(etcd, { key: "line/opener", seen: () => {} });
    const stream = await created(etcd, "line/x");
    expect(stream.created).toBe(true);
    // Taken by another client while the stream showed it to nobody (before the holding began to follow).
    await etcd.put("line/held", "theirs");
    await sleep(20);
    const seenKvs: Array<string | undefined> = [];
    const unfollow = followKey(etcd, { key: "line/held", seen: (kv) => seenKvs.push(kv?.value) });
    await until("its read", 1_000, async () => seenKvs.length > 0);
    expect(seenKvs).toEqual(["theirs"]);
    unfollow();
    opener();
  });

  it("asks for deletes alone while only waiters use it; a holding that comes opens one with puts", async () => {
    const filters: unknown[] = [];
    const { etcd } = mockClient(
      {},
      {
        through: (input, init, forward) => {
          if (isWatch(input)) filters.push(JSON.parse(String(init?.body)).create_request.filters);
          return forward(input, init);
        },
      },
    );
    for (const k of ["a", "held"]) await etcd.put(`line/${k}`, k);
    const read = (await etcd.range({ prefix: "line/" })).header.revision;
    const waiters = [enterLine(etcd, "line/a"), enterLine(etcd, "line/a")];
    const first = waiters[1]!.sharedWatch()!;
    const onA = first.waitForDelete(seen("line/a"), read, never);
    expect(await onA.gap).toBe(false);
    expect(filters).toEqual([["NOPUT"]]);
    // A holding of the client comes to follow its key: the line's stream carries puts from now on.
    const seenKvs: Array<string | undefined> = [];
    const unfollow = followKey(etcd, { key: "line/held", seen: (kv) => seenKvs.push(kv?.value) });
    await until("the stream with puts created, and the holding's read", 1_000, async () => seenKvs.length > 0);
    expect(filters).toEqual([["NOPUT"], undefined]);
    const later = enterLine(etcd, "line/a");
    expect(later.sharedWatch()).not.toBe(first);
    // An overwrite that keeps the key reaches the holding (issue 37, finding 5), and its key's delete once only;
    // the waiter on the first stream still wakes on its predecessor's delete.
    await etcd.put("line/held", "theirs");
    const gone = await etcd.delete({ key: "line/a" });
    expect((await onA.deleted).header.revision).toBe(gone.header.revision);
    await etcd.delete({ key: "line/held" });
    await until("the delete seen", 1_000, async () => seenKvs.length === 3);
    await sleep(20);
    expect(seenKvs).toEqual(["held", "theirs", undefined]);
    // The first stream's waiters gone, it closes, while the line's stream serves its holding on.
    for (const waiter of waiters) waiter.leave();
    await sleep(400);
    expect(await stateOf(first)).toBe("ABORTED");
    expect(later.sharedWatch()!.created).toBe(true);
    later.leave();
    unfollow();
  });

  it("a stream of deletes a holding replaced closes soon after, if none of its waiters waits on it", async () => {
    const { etcd } = mockClient();
    // Two waiters of the client in the line, between waits: their stream is open, and nobody waits on it.
    const waiters = [enterLine(etcd, "line/a"), enterLine(etcd, "line/a")];
    const first = waiters[1]!.sharedWatch()!;
    const creation = first.waitForDelete(seen("line/a"), 0, never);
    await creation.gap;
    creation.cancel();
    const unfollow = followKey(etcd, { key: "line/held", seen: () => {} });
    await sleep(400);
    // Nothing more comes on it (no delete, no waiter): it closed at its linger all the same.
    expect(await stateOf(first)).toBe("ABORTED");
    expect(waiters[0]!.sharedWatch()).not.toBe(first);
    for (const waiter of waiters) waiter.leave();
    unfollow();
  });

  it("serves the client's holdings and waiters in the line on one stream, opened for a holding alone", async () => {
    const { etcd, calls } = mockClient();
    await etcd.put("line/held", "v");
    const seenKvs: Array<string | undefined> = [];
    const unfollow = followKey(etcd, { key: "line/held", seen: (kv) => seenKvs.push(kv?.value) });
    await sleep(20);
    // Opened for the holding: it reads its key once the stream is created.
    expect(calls.filter(isWatch)).toHaveLength(1);
    expect(seenKvs).toEqual(["v"]);
    // A waiter of the same client, alone in the line, uses the open stream.
    const waiter = enterLine(etcd, "line/other");
    expect(waiter.sharedWatch()).toBeDefined();
    waiter.leave();
    await etcd.put("line/held", "w");
    await etcd.delete({ key: "line/held" });
    await sleep(20);
    expect(seenKvs).toEqual(["v", "w", undefined]);
    expect(calls.filter(isWatch)).toHaveLength(1);
    unfollow();
    await sleep(400);
    // Nobody left: closed; the next holding opens a new stream.
    const again = followKey(etcd, { key: "line/held", seen: () => {} });
    await sleep(20);
    expect(calls.filter(isWatch)).toHaveLength(2);
    again();
  });
});
