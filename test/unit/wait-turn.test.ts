// A waiter's turn (src/lock/line/wait.ts's waitForTurn and waitInLine), driven directly on the in-memory gateway:
// what each exit needs before it says "I hold", when a wait reads instead of watching, and which backup it takes
// when its watch may have stalled. The line is real keys on the mock; what a read shows is scripted, so each test
// states exactly the standing a wait acts on.
import { describe, expect, it } from "vitest";
import type { KeyValue } from "../../src/api/codec.js";
import { getEventListeners } from "node:events";
import { Etcd, EtcdError, type Fetch } from "../../src/index.js";
import { enterLine } from "../../src/lock/line/line-watch.js";
import type { Joined, ReadAt, Standing, Waiting } from "../../src/lock/line/standing.js";
import { waitForTurn, waitInLine } from "../../src/lock/line/wait.js";
import { createMockEtcdCore } from "../../src/testing/mock.js";
import { rejection, sleep, until, within } from "../support/async.js";
import { permissionDenied } from "../support/gateway.js";
import { bufferingFetch, heldWatches, type StallingEndpoints, stallingEndpoints } from "../support/outage.js";

const ENDPOINT = "http://etcd.test:2379";

/**
 * A client on a fresh mock: `watches`, the watch requests it sends (its streams' renewals too); `watched`, the
 * watches a wait asks of it. `wrap` puts a fault between it and the mock, and
 * `endpoints` are the client's (each reaches the mock unless `wrap` says otherwise). `writer`: a client of the
 * same mock with no fault, for the test's own writes.
 */
function onMock({ wrap = (fetch: Fetch) => fetch, endpoints = [ENDPOINT] as readonly string[] } = {}) {
  const mock = createMockEtcdCore();
  const watches: string[] = [];
  const direct: Fetch = (input, init) => mock.fetch(input, init as never) as never;
  const inner = wrap(direct);
  const fetch: Fetch = (input, init) => {
    if (new URL(input).pathname === "/v3/watch") watches.push(String(init.body));
    return inner(input, init);
  };
  const writer = new Etcd({ endpoints: ENDPOINT, fetch: direct });
  const etcd = new Etcd({ endpoints: [...endpoints], fetch });
  const watched: unknown[] = [];
  const watch = etcd.watch.bind(etcd);
  etcd.watch = ((query) => {
    watched.push(query);
    return watch(query);
  }) as typeof etcd.watch;
  return { mock, watches, watched, writer, etcd };
}

/** A key of the line as etcd holds it. */
async function key(etcd: Etcd, name: string): Promise<KeyValue> {
  await etcd.put(`line/${name}`, name);
  return (await etcd.get(`line/${name}`))!;
}

/** A standing at the client's current revision. */
async function standing(etcd: Etcd, fields: Partial<Standing>): Promise<Standing> {
  const { header } = await etcd.range({ prefix: "line/" });
  return { header, revision: 1_000, present: true, ...fields };
}

/** What a scripted read answers: a standing's fields, or a function that gives them when the read is made. */
type Answer = Partial<Standing> | (() => Partial<Standing>);

/**
 * A reader that answers the scripted standings in turn (the last again once they run out), recording each read.
 * A read sent without its wait's signal fails: every read of a wait must end with the wait.
 */
function scripted(etcd: Etcd, ...answers: Answer[]) {
  const reads: ReadAt[] = [];
  const read = async (at: ReadAt): Promise<Standing> => {
    reads.push(at);
    at.signal.throwIfAborted();
    const answer = answers[Math.min(reads.length - 1, answers.length - 1)]!;
    return standing(etcd, typeof answer === "function" ? answer() : answer);
  };
  return { read, reads };
}

/** A wait's context that records each handover and says SESSION_EXPIRED for a key gone. */
function context(overrides: Partial<Waiting> = {}) {
  const handovers: KeyValue[] = [];
  const waited: Array<number | undefined> = [];
  const wait: Waiting = {
    signal: new AbortController().signal,
    mode: "watch",
    pollInterval: 20,
    tryOnly: false,
    expired: () => new EtcdError("SESSION_EXPIRED", "our key went"),
    handover: async (departed) => void handovers.push(departed),
    waiting: (position) => void waited.push(position),
    ...overrides,
  };
  return { wait, handovers, waited };
}

describe("waitForTurn's exits", () => {
  it("holds at once from a standing with nothing ahead, handing over nothing (no key left before it)", async () => {
    const { etcd, watches } = onMock();
    const { read, reads } = scripted(etcd, {});
    const { wait, handovers } = context();
    const start = await standing(etcd, {});
    expect(await waitForTurn(etcd, read, start, wait)).toBe(start.header);
    expect(handovers).toEqual([]);
    expect(reads).toEqual([]);
    expect(watches).toEqual([]);
  });

  it("fails with the context's SESSION_EXPIRED when a standing shows our key gone", async () => {
    const { etcd } = onMock();
    const { read } = scripted(etcd, {});
    const { wait, handovers } = context();
    const error = await rejection(waitForTurn(etcd, read, await standing(etcd, { present: false }), wait));
    expect(error.code).toBe("SESSION_EXPIRED");
    expect(handovers).toEqual([]);
  });

  it("behind the head, holds on the head's delete with no read, handing over the key that left", async () => {
    const { etcd, writer } = onMock();
    const a = await key(writer, "a");
    const { read, reads } = scripted(etcd, {});
    const { wait, handovers } = context();
    const turn = waitForTurn(etcd, read, await standing(etcd, { predecessor: a, predecessorIsFirst: true }), wait);
    await sleep(50);
    const { header } = await writer.delete({ key: "line/a" });
    expect((await within(1_000, "the turn", turn)).revision).toBe(header.revision);
    expect(handovers.map((kv) => kv.key)).toEqual(["line/a"]);
    expect(reads).toEqual([]);
  });

  it("an abort given before the wait starts ends it at once, leaving no listener on the caller's signal", async () => {
    const { etcd, writer, mock } = onMock();
    const a = await key(writer, "a");
    const { read } = scripted(etcd, { predecessor: a });
    const gaveUp = new AbortController();
    gaveUp.abort();
    const { wait } = context({ signal: gaveUp.signal });
    const start = await standing(etcd, { predecessor: a, predecessorIsFirst: true });
    expect((await within(1_000, "the wait", rejection(waitForTurn(etcd, read, start, wait)))).code).toBe("ABORTED");
    expect(getEventListeners(gaveUp.signal, "abort")).toEqual([]);
    await until("no stream open", 1_000, () => mock.openWatchStreams === 0);
  });

  it("a wait that ends leaves no listener on the caller's signal and no stream open", async () => {
    const { etcd, writer, mock } = onMock();
    const a = await key(writer, "a");
    const { read } = scripted(etcd, {});
    const { wait } = context();
    const turn = waitForTurn(etcd, read, await standing(etcd, { predecessor: a, predecessorIsFirst: true }), wait);
    await sleep(50);
    await writer.delete({ key: "line/a" });
    await within(1_000, "the turn", turn);
    expect(getEventListeners(wait.signal, "abort")).toEqual([]);
    await until("no stream open", 1_000, () => mock.openWatchStreams === 0);
  });
});

describe("waitInLine: from a join to the wait", () => {
  const busy = (holder: string) => new EtcdError("LOCKED", `held by ${holder}`);
  const joined = (fields: Omit<Joined, "header" | "revision" | "present">, at: Standing): Joined => ({
    ...at,
    ...fields,
  });

  it("a resent join reads the line first, on the wait's signal; a try it shows first holds, never busy", async () => {
    const { etcd, writer } = onMock();
    const a = await key(writer, "a");
    const { read, reads } = scripted(etcd, {});
    const { wait, waited, handovers } = context({ tryOnly: true });
    const header = (await standing(etcd, {})).header;
    const resent = joined({ created: false, holder: a, predecessor: a }, await standing(etcd, {}));
    expect((await waitInLine(etcd, wait, resent, read, busy)).revision).toBe(header.revision);
    expect(reads.map((at) => at.signal)).toEqual([wait.signal]);
    expect(waited).toEqual([]);
    expect(handovers).toEqual([]);
  });

  it("a try whose resent join reads a key ahead is busy on the holder its join saw, else on that key", async () => {
    const { etcd, writer } = onMock();
    const [a, b] = [await key(writer, "a"), await key(writer, "b")];
    const { read } = scripted(etcd, { predecessor: b, ahead: 2 });
    const { wait, waited } = context({ tryOnly: true });
    const at = await standing(etcd, {});
    const known = await rejection(waitInLine(etcd, wait, joined({ created: false, holder: a }, at), read, busy));
    expect(known.message).toBe("held by line/a");
    const unknown = await rejection(waitInLine(etcd, wait, joined({ created: false }, at), read, busy));
    expect(unknown.message).toBe("held by line/b");
    expect(waited).toEqual([]);
  });
});

describe("when a wait reads instead of watching", () => {
  it("polls from the start when streams through its endpoint came back held back, and opens no watch", async () => {
    const { etcd, writer, watches } = onMock();
    const a = await key(writer, "a");
    etcd.transport.streamHeldBack(ENDPOINT);
    let gone = false;
    const { read, reads } = scripted(etcd, () => (gone ? {} : { predecessor: a, predecessorIsFirst: true }));
    const { wait } = context();
    const turn = waitForTurn(etcd, read, await standing(etcd, { predecessor: a, predecessorIsFirst: true }), wait);
    await until("polls", 1_000, () => reads.length >= 3);
    gone = true;
    await within(1_000, "the turn", turn);
    expect(watches).toEqual([]);
  });

  it("polls once its watch comes back held back (a buffering proxy), instead of opening another", async () => {
    const { etcd, writer, watches } = onMock({ wrap: bufferingFetch });
    const a = await key(writer, "a");
    let gone = false;
    const { read, reads } = scripted(etcd, () => (gone ? {} : { predecessor: a, predecessorIsFirst: true }));
    const { wait } = context();
    const turn = waitForTurn(etcd, read, await standing(etcd, { predecessor: a, predecessorIsFirst: true }), wait);
    // Its second watch, a second into the wait, comes back held back too.
    await until("polls", 3_000, () => reads.length >= 2);
    const opened = watches.length;
    await until("polls on", 3_000, () => reads.length >= 8);
    gone = true;
    await within(1_000, "the turn", turn);
    expect(watches).toHaveLength(opened);
  });

  it("reads after a pause once its watch broke beyond its own reconnections, then watches again", async () => {
    // Every watch stream ends as soon as it opens, with nothing said: a proxy that drops streams.
    const dropped =
      (fetch: Fetch): Fetch =>
      async (input, init) =>
        input.endsWith("/v3/watch") ? (new Response("", { status: 200 }) as never) : fetch(input, init);
    const { etcd, writer, watched } = onMock({ wrap: dropped });
    const a = await key(writer, "a");
    const { read, reads } = scripted(etcd, { predecessor: a, predecessorIsFirst: true });
    const gaveUp = new AbortController();
    const start = await standing(etcd, { predecessor: a, predecessorIsFirst: true });
    const turn = rejection(waitForTurn(etcd, read, start, context({ signal: gaveUp.signal }).wait));
    // The watch's reconnections take some seconds to give up; then a pause, one read, and a watch again.
    await until("the read after the pause", 15_000, () => reads.length === 1);
    const opened = watched.length;
    await until("a watch again", 1_000, () => watched.length > opened);
    expect(reads).toHaveLength(1);
    gaveUp.abort();
    expect((await within(1_000, "the abort", turn)).code).toBe("ABORTED");
  }, 30_000);

  it("gives up with the refusal when its watch is refused, rather than watching again", async () => {
    const refused =
      (fetch: Fetch): Fetch =>
      async (input, init) =>
        input.endsWith("/v3/watch") ? (permissionDenied() as never) : fetch(input, init);
    for (const sharing of [false, true]) {
      const { etcd, writer, watches } = onMock({ wrap: refused });
      const a = await key(writer, "a");
      const other = sharing ? enterLine(etcd, "line/x") : undefined;
      const { read } = scripted(etcd, { predecessor: a, predecessorIsFirst: true });
      const start = await standing(etcd, { predecessor: a, predecessorIsFirst: true });
      const error = await within(2_000, "the wait", rejection(waitForTurn(etcd, read, start, context().wait)));
      expect(error.code, `on the line's stream: ${sharing}`).toBe("PERMISSION_DENIED");
      expect(watches.length).toBeLessThanOrEqual(2);
      other?.leave();
    }
  });
});

describe("the gap between a wait's read and its watch", () => {
  it("a watch created after the read reads again, and watches on while the read shows the same key ahead", async () => {
    const { etcd, writer, watches } = onMock();
    const a = await key(writer, "a");
    const start = await standing(etcd, { predecessor: a, predecessorIsFirst: true });
    await writer.put("elsewhere", "x"); // The watch will be created after the read's revision.
    const { read, reads } = scripted(etcd, { predecessor: a, predecessorIsFirst: true });
    const turn = waitForTurn(etcd, read, start, context().wait);
    await until("the gap read", 1_000, () => reads.length === 1);
    await sleep(50);
    await writer.delete({ key: "line/a" });
    await within(1_000, "the turn", turn);
    expect(watches).toHaveLength(1);
    expect(reads).toHaveLength(1);
  });

  it("a watch's renewed streams read nothing: only its first creation can leave a gap", async () => {
    const { etcd, writer } = onMock();
    const a = await key(writer, "a");
    const { read, reads } = scripted(etcd, { predecessor: a, predecessorIsFirst: true });
    const turn = waitForTurn(
      etcd,
      read,
      await standing(etcd, { predecessor: a, predecessorIsFirst: true }),
      context().wait,
    );
    await sleep(100);
    await writer.put("elsewhere", "x"); // Every stream created from now on is past the wait's read.
    // Its streams renew each second; its second watch, a second in, is a first creation, and reads once.
    await sleep(2_600);
    expect(reads).toHaveLength(1);
    await writer.delete({ key: "line/a" });
    await within(1_000, "the turn", turn);
  });

  it("a gap read that shows the key ahead gone ends the wait, and closes the watch it opened", async () => {
    const { etcd, writer, mock } = onMock();
    const a = await key(writer, "a");
    const start = await standing(etcd, { predecessor: a, predecessorIsFirst: true });
    await writer.delete({ key: "line/a" }); // Before the watch: only the read can show it.
    const { read } = scripted(etcd, {});
    const { wait, handovers } = context();
    await within(1_000, "the turn", waitForTurn(etcd, read, start, wait));
    expect(handovers.map((kv) => kv.key)).toEqual(["line/a"]);
    await until("no stream open", 1_000, () => mock.openWatchStreams === 0);
  });
});

describe("on the line's stream shared with the client's other waiters", () => {
  it("a delete the stream shows after it was created needs no read: the head's delete is the turn", async () => {
    const { etcd, writer } = onMock();
    const a = await key(writer, "a");
    const other = enterLine(etcd, "line/x");
    const opening = enterLine(etcd, "line/y");
    const stream = opening.sharedWatch()!;
    const probe = stream.waitForDelete({ key: "line/none", createRevision: 1 }, 0, new AbortController().signal);
    await probe.gap;
    probe.cancel();
    const { read, reads } = scripted(etcd, {});
    const turn = waitForTurn(
      etcd,
      read,
      await standing(etcd, { predecessor: a, predecessorIsFirst: true }),
      context().wait,
    );
    await sleep(50);
    await writer.delete({ key: "line/a" });
    await within(1_000, "the turn", turn);
    expect(reads).toEqual([]);
    other.leave();
    opening.leave();
  });

  it("a stream opened after the read reads once; the same key ahead there, the head's delete is the turn", async () => {
    const { etcd, writer } = onMock();
    const a = await key(writer, "a");
    const other = enterLine(etcd, "line/x");
    const start = await standing(etcd, { predecessor: a, predecessorIsFirst: true });
    await writer.put("elsewhere", "x");
    // The read shows the same key ahead, but not as the head: only the delete the wait began with may say so.
    const { read, reads } = scripted(etcd, { predecessor: a }, {});
    const turn = waitForTurn(etcd, read, start, context().wait);
    await until("the gap read", 1_000, () => reads.length === 1);
    await sleep(50);
    await writer.delete({ key: "line/a" });
    await within(1_000, "the turn", turn);
    expect(reads).toHaveLength(1);
    other.leave();
  });

  it("a stream opened after the key ahead went: the read shows it, the wait ends, the stream closes", async () => {
    const { etcd, writer, mock } = onMock();
    const a = await key(writer, "a");
    const other = enterLine(etcd, "line/x");
    // Far back as it knew: no backup a second in would find what only the read can show.
    const start = await standing(etcd, { predecessor: a, ahead: 5 });
    await writer.delete({ key: "line/a" });
    const { read, reads } = scripted(etcd, {});
    await within(1_000, "the turn", waitForTurn(etcd, read, start, context().wait));
    expect(reads).toHaveLength(1);
    other.leave();
    await until("no stream open", 2_000, () => mock.openWatchStreams === 0);
  });
});

describe("a wait's backups against a watch that may have stalled", () => {
  /** `onMock` with every watch stream able to go silent (`held.hold()`), as through a stalled member. */
  function onHeldMock() {
    let held!: ReturnType<typeof heldWatches>;
    return { ...onMock({ wrap: (fetch) => (held = heldWatches(fetch)).fetch }), held };
  }

  /** The watches opened and the reads sent elsewhere (a look again) in `ms` of held streams. */
  async function backups(held: { hold(): void; resume(): void }, watches: unknown[], reads: ReadAt[], ms = 1_300) {
    const [watched, looked] = [watches.length, reads.filter((at) => at.avoid !== undefined).length];
    held.hold();
    await sleep(ms);
    held.resume();
    return { watches: watches.length - watched, looks: reads.filter((at) => at.avoid !== undefined).length - looked };
  }

  it("a waiter more than three back looks again after a second; three back, it opens a second watch", async () => {
    const { etcd, writer, watched: watches, held } = onHeldMock();
    const [, c, d, e] = [
      await key(writer, "b"),
      await key(writer, "c"),
      await key(writer, "d"),
      await key(writer, "e"),
    ];
    let ahead: KeyValue | undefined = d;
    const { read, reads } = scripted(etcd, () => (ahead === undefined ? {} : { predecessor: ahead }));
    const turn = waitForTurn(etcd, read, await standing(etcd, { predecessor: e, ahead: 5 }), context().wait);
    await sleep(100);
    await writer.delete({ key: "line/e" }); // Four ahead now.
    await until("the read after e", 1_000, () => reads.length === 1);
    await sleep(100);
    expect(await backups(held, watches, reads)).toEqual({ watches: 0, looks: 1 });
    ahead = c;
    await writer.delete({ key: "line/d" }); // Three ahead.
    await until("the read after d", 1_000, () => reads.length === 3);
    await sleep(100);
    expect(await backups(held, watches, reads)).toEqual({ watches: 1, looks: 0 });
    ahead = undefined;
    await writer.delete({ key: "line/c" });
    await within(1_000, "the turn", turn);
  });

  it("a waiter that cannot tell how far back it is opens a second watch after a second", async () => {
    const { etcd, writer, watched: watches, held } = onHeldMock();
    const [b, c] = [await key(writer, "b"), await key(writer, "c")];
    let ahead: KeyValue | undefined = b;
    const { read, reads } = scripted(etcd, () => (ahead === undefined ? {} : { predecessor: ahead }));
    const turn = waitForTurn(etcd, read, await standing(etcd, { predecessor: c }), context().wait);
    await sleep(100);
    await writer.delete({ key: "line/c" });
    await until("the read after c", 1_000, () => reads.length === 1);
    await sleep(100);
    expect(await backups(held, watches, reads)).toEqual({ watches: 1, looks: 0 });
    ahead = undefined;
    await writer.delete({ key: "line/b" });
    await within(1_000, "the turn", turn);
  });

  it("a waiter far back looks again after a second, then after twice as long each time", async () => {
    const { etcd, writer, watched: watches, held } = onHeldMock();
    const e = await key(writer, "e");
    let gone = false;
    const { read, reads } = scripted(etcd, () => (gone ? {} : { predecessor: e }));
    const turn = waitForTurn(etcd, read, await standing(etcd, { predecessor: e, ahead: 5 }), context().wait);
    await sleep(100);
    // Looks at 1 s and 3 s of the wait; the next would be at 7 s.
    expect(await backups(held, watches, reads, 3_400)).toEqual({ watches: 0, looks: 2 });
    gone = true;
    await writer.delete({ key: "line/e" });
    await within(1_000, "the turn", turn);
  });

  it("a waiter far back on the line's stream opens no backup: the stream is the client's, not its own", async () => {
    const { etcd, writer, watched: watches, held } = onHeldMock();
    const e = await key(writer, "e");
    const other = enterLine(etcd, "line/x");
    const { read, reads } = scripted(etcd, {});
    const turn = waitForTurn(etcd, read, await standing(etcd, { predecessor: e, ahead: 5 }), context().wait);
    await sleep(100);
    expect(await backups(held, watches, reads)).toEqual({ watches: 0, looks: 0 });
    await writer.delete({ key: "line/e" });
    await within(1_000, "the turn", turn);
    other.leave();
  });

  it("a waiter far back whose look elsewhere shows it behind the head watches there, holds on its delete", async () => {
    let stalling!: StallingEndpoints;
    const {
      etcd,
      writer,
      watched: watches,
    } = onMock({
      wrap: (fetch) => (stalling = stallingEndpoints(fetch, ENDPOINT)).fetch,
      endpoints: ["http://stalls.test:2379", "http://answers.test:2379"],
    });
    const e = await key(writer, "e");
    const gone = false;
    // Read through the test's own client: the reads' endpoints are the reader's business, `avoid` says which.
    const { read, reads } = scripted(writer, () => (gone ? {} : { predecessor: e, predecessorIsFirst: true }));
    const turn = waitForTurn(etcd, read, await standing(writer, { predecessor: e, ahead: 5 }), context().wait);
    await sleep(100);
    stalling.stall();
    await until("the look elsewhere", 2_000, () => reads.some((at) => at.avoid === stalling.endpoints[0]));
    await until("a watch elsewhere", 1_000, () => watches.length === 2);
    await sleep(100);
    await writer.delete({ key: "line/e" });
    await within(500, "the turn, on the watch elsewhere", turn);
    expect(watches).toHaveLength(2);
    expect(reads).toHaveLength(1);
    stalling.resume();
  });

  it("a second watch goes where the first is not, even once the client has failed over there", async () => {
    let stalling!: StallingEndpoints;
    const origins: string[] = [];
    const { etcd, writer } = onMock({
      wrap: (fetch) => {
        stalling = stallingEndpoints(fetch, ENDPOINT);
        return (input, init) => {
          if (new URL(input).pathname === "/v3/watch") origins.push(new URL(input).origin);
          return stalling.fetch(input, init);
        };
      },
      endpoints: ["http://stalls.test:2379", "http://answers.test:2379"],
    });
    const [stalls, answers] = stalling.endpoints;
    const e = await key(writer, "e");
    const { read } = scripted(writer, {});
    const turn = waitForTurn(etcd, read, await standing(writer, { predecessor: e, ahead: 1 }), context().wait);
    await until("the first watch, created", 1_000, () => origins.length === 1);
    await sleep(100);
    stalling.stall();
    // A request of the client's own moves it on to the endpoint that answers; the first watch stays where it was.
    await etcd.get("elsewhere", { attemptTimeout: 100 });
    expect(etcd.transport.endpoint).toBe(answers);
    await until("the second watch", 2_000, () => origins.length === 2);
    expect(origins).toEqual([stalls, answers]);
    await writer.delete({ key: "line/e" });
    await within(500, "the turn, on the second watch", turn);
    stalling.resume();
  });
});
