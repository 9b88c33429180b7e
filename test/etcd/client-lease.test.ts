// Leases over a real etcd: grant, keepAliveOnce, timeToLive, list, revoke, expiry, exact 64-bit IDs.
import { afterAll, describe, expect, it } from "vitest";
import { cmp, op } from "../../src/index.js";
import { client, sleep, uniquePrefix } from "./support";

const etcd = client();
/** Leases this file granted, revoked at the end whatever happens (the member is shared). */
const granted = new Set<string>();

async function grant(ttl: number, id?: string) {
  const lease = await etcd.lease.grant(ttl, id === undefined ? {} : { id });
  granted.add(lease.id);
  return lease;
}

afterAll(async () => {
  for (const id of granted) await etcd.lease.revoke(id).catch(() => {});
});

/** A random lease ID in (2^62, 2^63): far beyond what a double holds exactly. */
function bigLeaseId(): string {
  const random = BigInt(Math.floor(Math.random() * 2 ** 50)) * 1024n + BigInt(Math.floor(Math.random() * 1024));
  return ((1n << 62n) + random * 3n + 1n).toString();
}

describe("grant, keepAliveOnce, timeToLive, list", () => {
  it("grant returns the TTL asked for and a decimal ID", async () => {
    const lease = await grant(30);
    expect(lease.ttl).toBe(30);
    expect(lease.id).toMatch(/^[1-9][0-9]*$/);
    expect(BigInt(lease.id).toString()).toBe(lease.id);
    expect(lease.header.revision).toBeGreaterThan(0);
  });

  it("grant with a chosen ID (decimal string) gets exactly that ID", async () => {
    const id = bigLeaseId();
    const lease = await grant(30, id);
    expect(lease.id).toBe(id);
    expect((await etcd.lease.timeToLive(id)).grantedTtl).toBe(30);
  });

  it("keepAliveOnce returns the renewed TTL; timeToLive reports TTLs and attached keys", async () => {
    const ns = uniquePrefix("lease-ttl");
    const lease = await grant(40);
    await etcd.put(`${ns}b`, "1", { lease: lease.id });
    await etcd.put(`${ns}a`, "2", { lease: lease.id });
    await etcd.put(`${ns}unleased`, "3");

    const kept = await etcd.lease.keepAliveOnce(lease.id);
    expect(kept.id).toBe(lease.id);
    expect(kept.ttl).toBe(40);

    const info = await etcd.lease.timeToLive(lease.id, { keys: true });
    expect(info.id).toBe(lease.id);
    expect(info.grantedTtl).toBe(40);
    expect(info.ttl).toBeGreaterThan(35);
    expect(info.ttl).toBeLessThanOrEqual(40);
    expect([...info.keys].sort()).toEqual([`${ns}a`, `${ns}b`]);
    expect(info.keyBytes.map((k) => new TextDecoder().decode(k)).sort()).toEqual([`${ns}a`, `${ns}b`]);

    const withoutKeys = await etcd.lease.timeToLive(lease.id);
    expect(withoutKeys.keys).toEqual([]);
    expect(withoutKeys.grantedTtl).toBe(40);
  });

  it("timeToLive keys come back without a client's namespace", async () => {
    const ns = uniquePrefix("lease-ns");
    const scoped = client({ namespace: ns });
    const lease = await grant(30);
    await scoped.put("k", "v", { lease: lease.id });
    expect((await scoped.lease.timeToLive(lease.id, { keys: true })).keys).toEqual(["k"]);
    expect((await etcd.lease.timeToLive(lease.id, { keys: true })).keys).toEqual([`${ns}k`]);
  });

  it("list contains the granted leases", async () => {
    const a = await grant(30);
    const b = await grant(30, bigLeaseId());
    const { leases } = await etcd.lease.list();
    expect(leases).toContain(a.id);
    expect(leases).toContain(b.id);
    for (const id of leases) expect(id).toMatch(/^[0-9]+$/);
  });
});

describe("revoke", () => {
  it("deletes the attached keys; afterwards keepAliveOnce and timeToLive are LEASE_NOT_FOUND", async () => {
    const ns = uniquePrefix("lease-revoke");
    const lease = await grant(60);
    await etcd.put(`${ns}a`, "1", { lease: lease.id });
    await etcd.put(`${ns}b`, "2", { lease: lease.id });
    await etcd.put(`${ns}keep`, "3");

    const revoked = await etcd.lease.revoke(lease.id);
    expect(revoked.header.revision).toBeGreaterThan(0);
    const left = await etcd.range({ prefix: ns });
    expect(left.kvs.map((kv) => kv.key)).toEqual([`${ns}keep`]);

    await expect(etcd.lease.keepAliveOnce(lease.id)).rejects.toMatchObject({ code: "LEASE_NOT_FOUND" });
    await expect(etcd.lease.timeToLive(lease.id)).rejects.toMatchObject({ code: "LEASE_NOT_FOUND" });
    await expect(etcd.lease.revoke(lease.id)).rejects.toMatchObject({ code: "LEASE_NOT_FOUND", grpcCode: 5 });
    expect((await etcd.lease.list()).leases).not.toContain(lease.id);
    // A put with the dead lease is refused too.
    await expect(etcd.put(`${ns}late`, "x", { lease: lease.id })).rejects.toMatchObject({ code: "LEASE_NOT_FOUND" });
  });

  it("revoke of an unknown lease is LEASE_NOT_FOUND", async () => {
    await expect(etcd.lease.revoke(bigLeaseId())).rejects.toMatchObject({ code: "LEASE_NOT_FOUND", grpcCode: 5 });
    await expect(etcd.lease.keepAliveOnce(bigLeaseId())).rejects.toMatchObject({ code: "LEASE_NOT_FOUND" });
  });

  it("grant with an ID in use is ALREADY_EXISTS", async () => {
    const lease = await grant(30);
    await expect(etcd.lease.grant(30, { id: lease.id })).rejects.toMatchObject({ code: "ALREADY_EXISTS", grpcCode: 9 });
    // The original lease is untouched.
    expect((await etcd.lease.timeToLive(lease.id)).grantedTtl).toBe(30);
  });
});

describe("expiry", () => {
  it("keepAliveOnce keeps a 2 s lease past its TTL; without it the keys go and the lease is LEASE_NOT_FOUND", async () => {
    const ns = uniquePrefix("lease-expiry");
    const lease = await grant(2);
    expect(lease.ttl).toBe(2);
    await etcd.put(`${ns}k`, "v", { lease: lease.id });

    // 3 s of renewals every 0.7 s: longer than the TTL, the key must survive.
    const started = Date.now();
    while (Date.now() - started < 3_000) {
      await sleep(700);
      expect((await etcd.lease.keepAliveOnce(lease.id)).ttl).toBe(2);
    }
    expect(await etcd.get(`${ns}k`)).toMatchObject({ value: "v", lease: lease.id });

    // Stop renewing: gone within TTL + etcd's expiry check interval, bounded.
    const stopped = Date.now();
    for (;;) {
      if ((await etcd.get(`${ns}k`)) === undefined) break;
      if (Date.now() - stopped > 8_000) throw new Error("key with a 2 s lease still there after 8 s");
      await sleep(200);
    }
    expect(Date.now() - stopped).toBeGreaterThanOrEqual(1_000);
    await expect(etcd.lease.keepAliveOnce(lease.id)).rejects.toMatchObject({ code: "LEASE_NOT_FOUND" });
    await expect(etcd.lease.timeToLive(lease.id)).rejects.toMatchObject({ code: "LEASE_NOT_FOUND" });
  });
});

describe("IDs beyond 2^53 keep every digit", () => {
  it('grant with id "9007199254740993" (2^53 + 1) round-trips through put, get, txn, list, timeToLive, keepAliveOnce', async () => {
    const id = "9007199254740993"; // Number("9007199254740993") === 9007199254740992
    const ns = uniquePrefix("lease-precision");
    // A leftover from another run of this file on the same member would make the grant fail.
    await etcd.lease.revoke(id).catch(() => {});
    const lease = await grant(30, id);
    expect(lease.id).toBe(id);

    await etcd.put(`${ns}k`, "v", { lease: id });
    expect((await etcd.get(`${ns}k`))!.lease).toBe(id);
    expect((await etcd.lease.timeToLive(id, { keys: true })).keys).toEqual([`${ns}k`]);
    expect((await etcd.lease.keepAliveOnce(id)).id).toBe(id);
    expect((await etcd.lease.list()).leases).toContain(id);
    // The neighbour that a double would round to is not a lease.
    await expect(etcd.lease.timeToLive("9007199254740992")).rejects.toMatchObject({ code: "LEASE_NOT_FOUND" });

    const txn = await etcd
      .txn()
      .if(cmp.lease(`${ns}k`, "==", id))
      .then(op.get(`${ns}k`))
      .commit();
    expect(txn.succeeded).toBe(true);
    if (txn.succeeded) expect(txn.responses[0].kvs[0]!.lease).toBe(id);

    // A put with the rounded neighbour must not land on our lease.
    await expect(etcd.put(`${ns}k2`, "v", { lease: "9007199254740992" })).rejects.toMatchObject({ code: "LEASE_NOT_FOUND" });
  });

  it("a bigint lease ID is accepted and kept exact", async () => {
    const id = BigInt(bigLeaseId());
    const lease = await etcd.lease.grant(30, { id: id as unknown as string });
    granted.add(lease.id);
    expect(lease.id).toBe(id.toString());
  });

  it("an ID near int64 max round-trips", async () => {
    const id = (9223372036854775807n - BigInt(Math.floor(Math.random() * 1e6))).toString();
    const lease = await grant(30, id);
    expect(lease.id).toBe(id);
    const ns = uniquePrefix("lease-max");
    await etcd.put(`${ns}k`, "v", { lease: id });
    expect((await etcd.get(`${ns}k`))!.lease).toBe(id);
    expect((await etcd.lease.timeToLive(id)).id).toBe(id);
  });
});
