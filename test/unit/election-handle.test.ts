// What an election says through its own calls (src/lock/election/election.ts): nothing before its first win;
// a campaign while leading proclaims, and one while another is under way is refused; a campaign given up by its
// caller is ABORTED as such, one withdrawn by resign() says so; a leadership lost or ended by its session's close
// is resigned without an error, and a failed proclamation forgets it. On the mock.
import { describe, expect, it } from "vitest";
import type { Leader } from "../../src/index.js";
import { rejection, sleep } from "../support/async.js";
import { mockClient } from "../support/mock.js";

const campaignSession = async () => {
  const client = mockClient();
  const session = await client.etcd.session({ ttl: 30, keepAlive: "manual" });
  return { ...client, session };
};

describe("an election before its first win", () => {
  it("has no signal, key or token, and is NOT_LEADER when asked to fence or proclaim", async () => {
    const { session } = await campaignSession();
    const election = session.election("jobs");
    expect(election.isLeader).toBe(false);
    expect([election.signal, election.releaseRequested, election.key, election.revision]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expect((await rejection(() => election.ifLeader())).message).toBe("not the leader of election jobs");
    expect((await rejection(election.proclaim("v"))).code).toBe("NOT_LEADER");
  });

  it("named badly is INVALID_ARGUMENT saying it is an election's name", async () => {
    const { session } = await campaignSession();
    const error = await rejection(() => session.election(""));
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toMatch(/^an election name must be a non-empty string/);
  });
});

describe("campaign()", () => {
  it("while leading proclaims its value: same key and token, and no second candidacy", async () => {
    const { session, mock } = await campaignSession();
    const election = session.election("jobs");
    await election.campaign("first");
    const { key, revision } = election;
    await election.campaign("second", { timeout: 1_000 });
    expect([election.key, election.revision, election.isLeader]).toEqual([key, revision, true]);
    expect((await election.leader())?.value).toBe("second");
    expect(mock.keys("jobs/")).toEqual([key]);
  });

  it("while another campaign of it is under way is INVALID_ARGUMENT, sends nothing; the first goes on", async () => {
    const { session, etcd, mock, calls } = await campaignSession();
    const leader = (await etcd.session({ ttl: 30 })).election("jobs");
    await leader.campaign("other");
    const election = session.election("jobs");
    const first = election.campaign("mine");
    await sleep(50);
    const sent = calls.length;
    const error = await rejection(election.campaign("again"));
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toBe("a campaign for jobs is under way: await it, or resign() to withdraw it");
    expect(calls.length).toBe(sent);
    await leader.resign();
    await first;
    expect(election.isLeader).toBe(true);
    expect(mock.keys("jobs/")).toEqual([election.key]);
  });

  it("a string with a lone surrogate is INVALID_ARGUMENT, and nothing is sent", async () => {
    const { session, calls } = await campaignSession();
    const sent = calls.length;
    const error = await rejection(session.election("jobs").campaign("bad \ud800"));
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toContain("lone surrogate");
    expect(calls.length).toBe(sent);
  });

  it.each([
    ["given up by its caller's signal is ABORTED as such", "signal", /^(?!.*withdrawn)/],
    ["withdrawn by resign() says so", "resign", /withdrawn by resign\(\)/],
  ])("%s, and leaves no candidacy", async (_, how, message) => {
    const { session, etcd, mock } = await campaignSession();
    const leader = (await etcd.session({ ttl: 30 })).election("jobs");
    await leader.campaign("other");
    const election = session.election("jobs");
    const gaveUp = new AbortController();
    const campaigning = rejection(election.campaign("mine", { signal: gaveUp.signal }));
    await sleep(50);
    if (how === "signal") gaveUp.abort();
    else await election.resign();
    const error = await campaigning;
    expect(error.code).toBe("ABORTED");
    expect(error.message).toMatch(message);
    expect(mock.keys("jobs/")).toEqual([leader.key]);
  });
});

describe("a leadership that ended without resign()", () => {
  it.each([
    ["lost (its key deleted by another client)", "deleted"],
    ["released by its session's close", "closed"],
  ])("%s is resigned without an error", async (_, how) => {
    const { session, etcd } = await campaignSession();
    const election = session.election("jobs");
    await election.campaign("v");
    if (how === "deleted") await etcd.delete(election.key!);
    else await session.close();
    await election.resign();
    expect(election.isLeader).toBe(false);
  });

  it("a proclamation that finds its key gone is NOT_LEADER, and the election forgets it", async () => {
    const { session, etcd, mock } = await campaignSession();
    const election = session.election("jobs");
    await election.campaign("v");
    await etcd.delete(election.key!);
    expect((await rejection(election.proclaim("w"))).code).toBe("NOT_LEADER");
    expect([election.key, election.revision, election.signal, election.isLeader]).toEqual([
      undefined,
      undefined,
      undefined,
      false,
    ]);
    expect(mock.keys("jobs/")).toEqual([]);
  });
});

describe("observe()", () => {
  /** The next `n` leaders `observed` gives, as value and token. */
  const next = async (observed: AsyncIterator<Leader>, n: number) => {
    const seen: [string, number][] = [];
    for (let i = 0; i < n; i++) {
      const { value } = await observed.next();
      seen.push([value.value, value.revision]);
    }
    return seen;
  };

  it.each([
    ["an election nobody ever led", false],
    ["an election whose leader has just resigned (its delete is the revision read)", true],
  ])("of %s: the next leader, each proclamation once, then the leader after it", async (_, resigned) => {
    const { session, etcd } = await campaignSession();
    const [first, second] = [session.election("jobs"), (await etcd.session({ ttl: 30 })).election("jobs")];
    if (resigned) {
      const before = (await etcd.session({ ttl: 30 })).election("jobs");
      await before.campaign("gone");
      await before.resign();
    }
    const gaveUp = new AbortController();
    const observed = session.election("jobs").observe({ signal: gaveUp.signal })[Symbol.asyncIterator]();
    const seeing = next(observed, 3);
    await sleep(50);
    await first.campaign("one");
    const waiting = second.campaign("two");
    await first.proclaim("one, again");
    const token = first.revision;
    await sleep(50);
    await first.resign();
    await waiting;
    expect(await seeing).toEqual([
      ["one", token],
      ["one, again", token],
      ["two", second.revision],
    ]);
    gaveUp.abort();
    expect((await rejection(observed.next())).code).toBe("ABORTED");
  });
});
