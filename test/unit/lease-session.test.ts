// What a session says of its lease through its own calls (src/lock/lease/): background renewal, sooner after a
// failure; renew() on a session that ended, or that ended while the renewal was on its way; a renewal refused
// for want of permission, which ends the session and its locks saying why; close(), answered once and resent
// after a lost answer; and each end told once. On the mock, where a fault can be put on one request.
import { describe, expect, it } from "vitest";
import type { EtcdEvent, EtcdOptions, Fetch } from "../../src/index.js";
import { rejection, sleep, until } from "../support/async.js";
import { logChannels } from "../support/channels.js";
import { connectionReset, permissionDenied } from "../support/gateway.js";
import { failWhere, holdAnswers, mockClient, neverAnswered, type Through } from "../support/mock.js";
import { answerLosingFetch } from "../support/outage.js";

const isKeepAlive = (input: string) => input.endsWith("/v3/lease/keepalive");

/** Fails the keep-alives sent while `failing()` says so, with `fault` (a thrown error or an answer). */
const failKeepAlives = (failing: () => boolean, fault: () => Response | Error) =>
  failWhere(isKeepAlive, failing, fault);

describe("an auto session", () => {
  it("renews before its deadline, and after a failed renewal tries again within a second", async () => {
    const events: EtcdEvent[] = [];
    let failures = 0;
    // The first renewal fails, once: no retry inside the call (retries: 0), so the session's own loop must.
    const failing = failKeepAlives(() => failures++ === 0, connectionReset);
    // Each answer takes a little while, as over a network: a renewal must allow for it.
    const through: Through = async (input, init, forward) => {
      if (isKeepAlive(input)) await sleep(30);
      return failing(input, init, forward);
    };
    const { etcd } = mockClient({ retries: 0, onEvent: (event) => void events.push(event) }, { through });
    const log = logChannels();
    const session = await etcd.session({ ttl: 6 });
    const start = performance.now();
    await until("a renewal after the failure", 4_000, () => events.some((e) => e.type === "session.renewed"));
    log.stop();
    // No caller made them: they are published as the client's own.
    const renewals = log.seen.filter((s) => s.event === "request:start" && s.message.path === "/v3/lease/keepalive");
    expect(renewals.map((s) => s.message.background)).toEqual([true, true]);
    // Due at a third of the TTL (2 s), failed, tried again a second later (not half the 4 s left): at 3 s.
    expect(performance.now() - start).toBeLessThan(3_600);
    const failed = events.findIndex((e) => e.type === "session.renewFailed");
    const renewed = events.findIndex((e) => e.type === "session.renewed");
    expect(events[failed]).toMatchObject({ leaseId: session.leaseId, code: "UNAVAILABLE" });
    expect(failed).toBeLessThan(renewed);
    expect(session.remaining()).toBeGreaterThan(5_000);
    await session.close();
  });
});

describe("an auto session's renewal over a network", () => {
  /** An auto session of TTL 3 s whose keep-alives go `through`; resolves once it has renewed, or rejects. */
  async function renewsThrough(
    keepAlive: (forward: () => ReturnType<Fetch>, signal?: AbortSignal) => ReturnType<Fetch>,
  ) {
    const events: EtcdEvent[] = [];
    const through: Through = (input, init, forward) =>
      isKeepAlive(input) ? keepAlive(() => forward(input, init), init.signal ?? undefined) : forward(input, init);
    const { etcd } = mockClient({ onEvent: (event) => void events.push(event) }, { through });
    const session = await etcd.session({ ttl: 3 });
    // Due a second in, with 2 s left: past the first deadline, only a renewal keeps it.
    await sleep(3_300);
    expect(events.map((event) => event.type)).not.toContain("session.lost");
    expect(session.alive).toBe(true);
    await session.close();
  }

  it("whose answers take 400 ms (a far region) keeps the lease: an attempt may take its share of the time left", () =>
    renewsThrough(async (forward) => {
      await sleep(400);
      return forward();
    }));

  it("whose first attempt stalls (a half-open connection) is sent again within its share, and keeps the lease", () => {
    let stalled = false;
    return renewsThrough(async (forward, signal) => {
      if (stalled) return forward();
      stalled = true;
      // Never answered: only the attempt's own deadline frees it.
      return neverAnswered(signal);
    });
  });
});

describe("renewWhile()", () => {
  it.each([
    ["answered", false],
    ["failing", true],
  ])("leaves nothing running: a renewal on its way when the work ends (%s) schedules no other", async (_, fail) => {
    let answer: (() => void) | undefined;
    let keepAlives = 0;
    const through: Through = async (input, init, forward) => {
      if (!isKeepAlive(input)) return forward(input, init);
      keepAlives++;
      await new Promise<void>((resolve) => (answer = resolve));
      if (fail) throw connectionReset();
      return forward(input, init);
    };
    const { etcd } = mockClient({ retries: 0 }, { through });
    const session = await etcd.session({ ttl: 3, keepAlive: "manual" });
    // The first renewal goes out a third of the TTL in (at 1 s); the work ends while it waits for its answer.
    await session.renewWhile(() => until("a renewal on its way", 2_000, () => answer !== undefined));
    answer!();
    await sleep(1_500);
    expect(keepAlives).toBe(1);
    await session.close();
  });
});

describe("renew()", () => {
  it("of a closed session is SESSION_CLOSED, and sends nothing", async () => {
    const { etcd, calls } = mockClient();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    await session.close();
    const sent = calls.length;
    expect((await rejection(session.renew())).code).toBe("SESSION_CLOSED");
    expect(calls.slice(sent)).toEqual([]);
  });

  it("answered after its session was closed meanwhile is SESSION_CLOSED, and tells of no renewal", async () => {
    const events: string[] = [];
    const held = holdAnswers((input) => isKeepAlive(input));
    const { etcd } = mockClient({ onEvent: (event) => void events.push(event.type) }, { through: held.through });
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const renewing = rejection(session.renew());
    await until("the renewal landed", 2_000, held.caught);
    await session.close();
    held.go();
    expect((await renewing).code).toBe("SESSION_CLOSED");
    expect(session.alive).toBe(false);
    expect(events).not.toContain("session.renewed");
  });

  it("refused for want of permission ends the session, and its lock is lost saying why", async () => {
    let refusing = false;
    const { etcd } = mockClient({}, { through: failKeepAlives(() => refusing, permissionDenied) });
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    refusing = true;
    const error = await rejection(session.renew());
    expect(error.code).toBe("PERMISSION_DENIED");
    expect(error.message).toContain("grant this user readwrite");
    expect(session.signal.reason).toBe(error);
    expect(lock.held).toBe(false);
    const lost = await rejection(lock.unlock());
    expect(lost.code).toBe("LOCK_LOST");
    expect(lost.message).toContain("its session's lease could not be renewed");
  });
});

describe("close()", () => {
  it("answered once: a second close resolves false and sends nothing; a close is no loss", async () => {
    const events: string[] = [];
    const { etcd, calls } = mockClient({ onEvent: (event) => void events.push(event.type) });
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    expect(await session.close()).toBe(true);
    const sent = calls.length;
    expect(await session.close()).toBe(false);
    expect(calls.slice(sent)).toEqual([]);
    expect(events).not.toContain("session.lost");
  });

  it("after its lease had ended resolves false, and a second close sends nothing", async () => {
    const { etcd, calls } = mockClient();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    await etcd.lease.revoke(session.leaseId);
    expect(await session.close()).toBe(false);
    const sent = calls.length;
    expect(await session.close()).toBe(false);
    expect(calls.slice(sent)).toEqual([]);
  });

  it("with a bad timeout is INVALID_ARGUMENT naming it, and the session stays open", async () => {
    const { etcd } = mockClient();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const error = await rejection(session.close({ timeout: -1 }));
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toMatch(/^timeout /);
    expect(session.alive).toBe(true);
    await session.close();
  });

  it("by `await using` revokes the lease, and a revocation that fails throws nothing", async () => {
    let refusing = false;
    const { etcd, mock } = mockClient(
      {},
      {
        through: async (input, init, forward) =>
          refusing && input.endsWith("/v3/lease/revoke") ? (permissionDenied() as never) : forward(input, init),
      },
    );
    {
      await using session = await etcd.session({ ttl: 30, keepAlive: "manual" });
      expect(session.alive).toBe(true);
    }
    expect(mock.leases()).toHaveLength(0);
    refusing = true;
    const kept = await etcd.session({ ttl: 30, keepAlive: "manual" });
    await kept[Symbol.asyncDispose]();
    expect(kept.closed).toBe(true);
    expect(mock.leases()).toHaveLength(1);
  });

  it("whose revocation's answer was lost is sent again, and resolves true: the lease was there", async () => {
    const { mock } = mockClient();
    const losing = answerLosingFetch(
      (input, init) => mock.fetch(input, init as RequestInit) as never,
      (path) => path === "/v3/lease/revoke",
    );
    const { etcd } = mockClient({ fetch: losing }, { mock });
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    expect(await session.close()).toBe(true);
    expect(losing.lost).toBe(1);
    expect(mock.leases()).toHaveLength(0);
  });
});

describe("a session lost", () => {
  it("is told once: one session.lost to onEvent and one on diagnostics_channel, found twice at once", async () => {
    const log = logChannels();
    try {
      const events: string[] = [];
      const { etcd } = mockClient({ onEvent: (event) => void events.push(event.type) });
      const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
      await etcd.lease.revoke(session.leaseId);
      // Two renewals at once: each finds the lease gone.
      const found = await Promise.all([rejection(session.renew()), rejection(session.renew())]);
      expect(found.map((error) => error.code)).toEqual(["SESSION_EXPIRED", "SESSION_EXPIRED"]);
      expect((await rejection(session.renew())).code).toBe("SESSION_EXPIRED");
      await session.close();
      expect(events.filter((type) => type === "session.lost")).toHaveLength(1);
      expect(log.seen.filter((seen) => seen.event === "session.lost")).toHaveLength(1);
    } finally {
      log.stop();
    }
  });
});

describe("a session found past its deadline", () => {
  /** A client whose clock runs `ahead` ms ahead of the mock's: its deadline passes while etcd still holds the lease. */
  function aheadOfEtcd(options: Partial<EtcdOptions> = {}) {
    let ahead = 0;
    const clock = {
      now: () => performance.now() + ahead,
      setTimer: (fire: () => void, ms: number) => {
        const timer = setTimeout(fire, ms);
        return () => clearTimeout(timer);
      },
    };
    return { ...mockClient({ clock, ...options }), skip: (ms: number) => (ahead += ms) };
  }

  it("within a TTL of it: the lease etcd may still hold is revoked at once; close() sends nothing more", async () => {
    const { etcd, mock, calls, skip } = aheadOfEtcd();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    skip(31_000);
    expect((await rejection(session.renew())).code).toBe("SESSION_EXPIRED");
    // Its keys would block their lines for the rest of etcd's TTL (and a leader change's extension): not waited out.
    await until("the lease revoked", 2_000, () => !mock.leases().some((lease) => String(lease.id) === session.leaseId));
    expect(await session.close()).toBe(false);
    expect(calls.filter((path) => path === "/v3/lease/revoke")).toHaveLength(1);
  });

  it("says so at once, before any call or timer: neither the session nor its lock is alive or held", async () => {
    const { etcd, skip } = aheadOfEtcd();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    expect([session.alive, lock.held]).toEqual([true, true]);
    skip(30_000);
    expect([session.alive, lock.held, session.remaining()]).toEqual([false, false, 0]);
  });

  it("when its renewal comes due (a process thawed): lost, and no renewal sent or told failed", async () => {
    const events: string[] = [];
    const { etcd, calls, skip } = aheadOfEtcd({ onEvent: (event) => void events.push(event.type) });
    const session = await etcd.session({ ttl: 3 });
    // Frozen past its deadline before the renewal, due a second in, could run.
    skip(4_000);
    await until("the session lost", 2_000, () => !session.alive && events.includes("session.lost"));
    await sleep(1_200);
    expect(calls.filter((path) => path === "/v3/lease/keepalive")).toEqual([]);
    expect(events).not.toContain("session.renewFailed");
  });

  it("a TTL or more past it: nothing is sent, etcd has let the lease go", async () => {
    const { etcd, calls, skip } = aheadOfEtcd();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    skip(61_000);
    expect((await rejection(session.renew())).code).toBe("SESSION_EXPIRED");
    await sleep(100);
    expect(calls.filter((path) => path === "/v3/lease/revoke")).toHaveLength(0);
  });
});
