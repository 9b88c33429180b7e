// Lease conformance on the mock (virtual time: advance() expires leases at once) and real etcd (real time):
// grant, renewal, keys, revoke, expiry, and 64-bit IDs kept exact.
import { describe, expect, it } from "vitest";
import { cmp, op, type WatchBatch } from "../../src/index.js";
import { rejection, until, within } from "../support/async.js";
import { freshNames } from "../support/etcd.js";
import { useBackend } from "./backend.js";

const { backend, etcd } = useBackend();

const fresh = freshNames("lease", "/");

/** How long after advance(3_500) a 2 s lease may still take to go on real etcd. */
const EXPIRY_GRACE_MS = 3_000;

describe("grant, keepAliveOnce, timeToLive, list, revoke", () => {
  it("a granted lease reports its TTL, renews to full TTL, lists, and carries its keys", async () => {
    const p = fresh();
    const lease = await etcd.lease.grant(30);
    expect(lease.ttl).toBe(30);
    expect(lease.id).toMatch(/^[1-9][0-9]*$/);
    try {
      const ttl = await etcd.lease.timeToLive(lease.id);
      expect(ttl).toMatchObject({ id: lease.id, grantedTtl: 30, keys: [] });
      expect(ttl.ttl).toBeGreaterThanOrEqual(28);
      expect(ttl.ttl).toBeLessThanOrEqual(30);
      await etcd.put(`${p}b`, "2", { lease: lease.id });
      await etcd.put(`${p}a`, "1", { lease: lease.id });
      const withKeys = await etcd.lease.timeToLive(lease.id, { keys: true });
      // Keys come back without the client's namespace, in key order.
      expect([...withKeys.keys].sort()).toEqual([`${p}a`, `${p}b`]);
      expect(withKeys.keyBytes.map((k) => new TextDecoder().decode(k)).sort()).toEqual([`${p}a`, `${p}b`]);
      // Without keys: true, none are listed.
      expect((await etcd.lease.timeToLive(lease.id)).keys).toEqual([]);
      const renewed = await etcd.lease.keepAliveOnce(lease.id);
      expect(renewed).toMatchObject({ id: lease.id, ttl: 30 });
      const { leases } = await etcd.lease.list();
      expect(leases).toContain(lease.id);
      expect(leases.every((id) => /^[0-9]+$/.test(id))).toBe(true);
    } finally {
      await etcd.lease.revoke(lease.id).catch(() => {});
    }
  });

  it("a TTL below the minimum is raised to 2 s (the 1 s election timeout's minimum)", async () => {
    const lease = await etcd.lease.grant(1);
    try {
      expect(lease.ttl).toBe(2);
      expect((await etcd.lease.timeToLive(lease.id)).grantedTtl).toBe(2);
    } finally {
      await etcd.lease.revoke(lease.id).catch(() => {});
    }
  });

  it("a lease with a chosen ID; the same ID again → ALREADY_EXISTS", async () => {
    const id = String(1_000_000 + Math.floor(Math.random() * 1e12));
    const lease = await etcd.lease.grant(30, { id });
    try {
      expect(lease.id).toBe(id);
      const error = await rejection(etcd.lease.grant(10, { id }));
      // FailedPrecondition is HTTP 412 on 3.4 and 400 on 3.5 (test/README.md); the code is what callers use.
      expect(error).toMatchObject({
        code: "ALREADY_EXISTS",
        grpcCode: 9,
        httpStatus: backend.wire === "3.4" ? 412 : 400,
      });
      // The original lease is untouched.
      expect((await etcd.lease.timeToLive(id)).grantedTtl).toBe(30);
    } finally {
      await etcd.lease.revoke(id).catch(() => {});
    }
  });

  it("revoke deletes the keys in one revision; afterwards every lease call is LEASE_NOT_FOUND", async () => {
    const p = fresh();
    const lease = await etcd.lease.grant(30);
    await etcd.put(`${p}a`, "1", { lease: lease.id });
    await etcd.put(`${p}b`, "2", { lease: lease.id });
    await etcd.put(`${p}keep`, "3");
    const before = (await etcd.range({ prefix: p })).header.revision;
    const revoked = await etcd.lease.revoke(lease.id);
    expect(revoked.header.revision).toBeGreaterThan(before);
    expect((await etcd.range({ prefix: p })).kvs.map((kv) => kv.key)).toEqual([`${p}keep`]);
    // Both deletes happened at one revision: the revision just before it still has both keys.
    const history = await etcd.range({ prefix: p, revision: revoked.header.revision - 1 });
    expect(history.kvs.map((kv) => kv.key)).toEqual([`${p}a`, `${p}b`, `${p}keep`]);
    await expectGone(lease.id);
    expect((await etcd.lease.list()).leases).not.toContain(lease.id);
  });
});

it("a lease that never existed: revoke, keepAliveOnce and timeToLive → LEASE_NOT_FOUND", async () => {
  const id = bigLeaseId();
  expect(await rejection(etcd.lease.revoke(id))).toMatchObject({ code: "LEASE_NOT_FOUND", grpcCode: 5 });
  expect((await rejection(etcd.lease.keepAliveOnce(id))).code).toBe("LEASE_NOT_FOUND");
  expect((await rejection(etcd.lease.timeToLive(id))).code).toBe("LEASE_NOT_FOUND");
});

async function expectGone(id: string): Promise<void> {
  const ttl = await rejection(etcd.lease.timeToLive(id));
  expect(ttl.code).toBe("LEASE_NOT_FOUND");
  const keepAlive = await rejection(etcd.lease.keepAliveOnce(id));
  expect(keepAlive.code).toBe("LEASE_NOT_FOUND");
  const revoke = await rejection(etcd.lease.revoke(id));
  expect(revoke).toMatchObject({ code: "LEASE_NOT_FOUND", grpcCode: 5, httpStatus: 404 });
  const put = await rejection(etcd.put(`${fresh()}late`, "v", { lease: id }));
  expect(put.code).toBe("LEASE_NOT_FOUND");
}

describe("expiry", () => {
  it(
    "an unrenewed lease expires: " + "its keys are deleted in ONE revision (one watch batch), then LEASE_NOT_FOUND",
    async () => {
      const p = fresh();
      const lease = await etcd.lease.grant(2);
      const put = await etcd.put(`${p}a`, "1", { lease: lease.id });
      await etcd.put(`${p}b`, "2", { lease: lease.id });
      await etcd.put(`${p}c`, "3", { lease: lease.id });
      await etcd.put(`${p}keep`, "4");
      const controller = new AbortController();
      const watch = etcd
        .watch({
          prefix: p,
          startRevision: put.header.revision + 1,
          noPut: true,
          prevKv: true,
          signal: controller.signal,
        })
        [Symbol.asyncIterator]();
      const first = watch.next();
      try {
        await backend.advance(3_500);
        await until(
          "lease keys deleted",
          EXPIRY_GRACE_MS,
          async () => (await etcd.range({ prefix: p, countOnly: true })).count === 1,
        );
        const next = await within(EXPIRY_GRACE_MS, "watch batch", first);
        expect(next.done).toBe(false);
        const batch = next.value as WatchBatch;
        expect(batch.events.map((e) => [e.type, e.kv.key, e.prevKv?.value])).toEqual([
          ["delete", `${p}a`, "1"],
          ["delete", `${p}b`, "2"],
          ["delete", `${p}c`, "3"],
        ]);
        const revisions = new Set(batch.events.map((e) => e.kv.modRevision));
        expect(revisions.size).toBe(1);
        expect(batch.header.revision).toBe([...revisions][0]);
        expect((await etcd.get(`${p}keep`))?.value).toBe("4");
        await expectGone(lease.id);
      } finally {
        controller.abort();
        await watch.return?.();
      }
    },
  );

  it("keepAliveOnce before expiry extends the lease", async () => {
    const p = fresh();
    const lease = await etcd.lease.grant(3);
    try {
      await etcd.put(`${p}k`, "v", { lease: lease.id });
      await backend.advance(1_500);
      expect((await etcd.lease.keepAliveOnce(lease.id)).ttl).toBe(3);
      await backend.advance(1_500);
      // 3 s since grant, 1.5 s since the renewal: still alive.
      expect(await etcd.get(`${p}k`)).toMatchObject({ value: "v", lease: lease.id });
      const ttl = (await etcd.lease.timeToLive(lease.id)).ttl;
      expect(ttl).toBeGreaterThanOrEqual(0);
      expect(ttl).toBeLessThanOrEqual(2);
    } finally {
      await etcd.lease.revoke(lease.id).catch(() => {});
    }
  });
});

/** A random lease ID in (2^62, 2^63): far beyond what a double holds exactly. */
function bigLeaseId(): string {
  const random = BigInt(Math.floor(Math.random() * 2 ** 50)) * 1024n + BigInt(Math.floor(Math.random() * 1024));
  return ((1n << 62n) + random * 3n + 1n).toString();
}

describe("IDs beyond 2^53 keep every digit", () => {
  it(
    '"9007199254740993" (2^53 + 1) round-trips through grant, ' + "put, get, txn, list, timeToLive, keepAliveOnce",
    async () => {
      const id = "9007199254740993"; // Number("9007199254740993") === 9007199254740992
      const p = fresh();
      // A leftover from another run on the same member would make the grant fail.
      await etcd.lease.revoke(id).catch(() => {});
      const lease = await etcd.lease.grant(30, { id });
      try {
        expect(lease.id).toBe(id);
        await etcd.put(`${p}k`, "v", { lease: id });
        expect((await etcd.get(`${p}k`))?.lease).toBe(id);
        expect((await etcd.lease.timeToLive(id, { keys: true })).keys).toEqual([`${p}k`]);
        expect((await etcd.lease.keepAliveOnce(id)).id).toBe(id);
        expect((await etcd.lease.list()).leases).toContain(id);
        const txn = await etcd
          .txn()
          .if(cmp.lease(`${p}k`, "==", id))
          .then(op.get(`${p}k`))
          .commit();
        expect(txn.succeeded).toBe(true);
        if (txn.succeeded) expect(txn.responses[0].kvs[0]?.lease).toBe(id);
        // The neighbour a double would round to is not a lease, and a put with it must not land on ours.
        expect((await rejection(etcd.lease.timeToLive("9007199254740992"))).code).toBe("LEASE_NOT_FOUND");
        expect((await rejection(etcd.put(`${p}k2`, "v", { lease: "9007199254740992" }))).code).toBe("LEASE_NOT_FOUND");
      } finally {
        await etcd.lease.revoke(id).catch(() => {});
      }
    },
  );

  it("random IDs in (2^62, 2^63), one given as a bigint, and one next to int64 max, are kept exact", async () => {
    const p = fresh();
    const ids = [bigLeaseId(), (9223372036854775807n - BigInt(Math.floor(Math.random() * 1e6))).toString()];
    const fromBigint = BigInt(bigLeaseId());
    try {
      for (const id of ids) {
        expect((await etcd.lease.grant(30, { id })).id).toBe(id);
        await etcd.put(`${p}${id}`, "v", { lease: id });
        expect((await etcd.get(`${p}${id}`))?.lease).toBe(id);
        expect((await etcd.lease.timeToLive(id)).id).toBe(id);
      }
      expect((await etcd.lease.grant(30, { id: fromBigint as unknown as string })).id).toBe(fromBigint.toString());
      const { leases } = await etcd.lease.list();
      expect(leases).toEqual(expect.arrayContaining([...ids, fromBigint.toString()]));
    } finally {
      for (const id of [...ids, fromBigint.toString()]) await etcd.lease.revoke(id).catch(() => {});
    }
  });
});
