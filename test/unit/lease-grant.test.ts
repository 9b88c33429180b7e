// How a session gets its lease (src/lock/lease/lease-grant.ts): options checked before anything is sent; a lease
// to adopt that is gone is SESSION_EXPIRED; and a grant whose ID (drawn by the session, so that a resend is safe)
// another lease already has draws again, at most four times, never taking the other's lease for its own. On the
// mock, with the CSPRNG's answers chosen.
import { afterEach, describe, expect, it, vi } from "vitest";
import { rejection } from "../support/async.js";
import { sameDraws } from "../support/draws.js";
import { mockClient } from "../support/mock.js";

afterEach(() => {
  vi.restoreAllMocks();
});

/** The ID a grant draws when the CSPRNG answers 0x5a bytes. */
const DRAWN = ((BigInt(0x5a5a5a5a) << 32n) | BigInt(0x5a5a5a5a)).toString();

describe("a session's options", () => {
  it("keepAlive other than auto or manual is INVALID_ARGUMENT naming both, and nothing is sent", async () => {
    const { etcd, calls } = mockClient();
    const error = await rejection(etcd.session({ keepAlive: "sometimes" as never }));
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toBe('keepAlive must be "auto" or "manual", got string sometimes');
    expect(calls).toEqual([]);
  });

  it("a lease to adopt that is gone is SESSION_EXPIRED", async () => {
    const { etcd } = mockClient();
    const lease = await etcd.lease.grant(30);
    await etcd.lease.revoke(lease.id);
    expect((await rejection(etcd.session({ leaseId: lease.id }))).code).toBe("SESSION_EXPIRED");
  });
});

describe("a grant whose drawn ID another lease has", () => {
  it("draws again: the session's lease is its own, and the other is untouched", async () => {
    const { etcd } = mockClient();
    await etcd.lease.grant(300, { id: DRAWN });
    sameDraws(1);
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    expect(session.leaseId).not.toBe(DRAWN);
    expect(session.ttl).toBe(30);
    expect((await etcd.lease.timeToLive(DRAWN)).grantedTtl).toBe(300);
    await session.close();
    expect((await etcd.lease.timeToLive(DRAWN)).grantedTtl).toBe(300);
  });

  it("three times: the fourth draw is granted; every time: ALREADY_EXISTS after the fourth", async () => {
    const { etcd, calls } = mockClient();
    await etcd.lease.grant(300, { id: DRAWN });
    sameDraws(3);
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    expect(session.leaseId).not.toBe(DRAWN);
    vi.restoreAllMocks();
    sameDraws(Number.POSITIVE_INFINITY);
    const sent = calls.length;
    expect((await rejection(etcd.session({ ttl: 30 }))).code).toBe("ALREADY_EXISTS");
    expect(calls.slice(sent)).toEqual(Array(4).fill("/v3/lease/grant"));
  });
});
