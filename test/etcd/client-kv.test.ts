// KV over a real etcd: put/get/range/delete/compact, options, errors, bytes and namespaces.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Etcd, EtcdCompactedError, EtcdError, EtcdServerError, type KeyValue } from "../../src/index.js";
import { startEtcd, type EtcdMember } from "./harness";
import { bytes, client, forbiddenFetch, uniquePrefix } from "./support";

const enc = (s: string) => new TextEncoder().encode(s);
const keysOf = (kvs: KeyValue[]) => kvs.map((kv) => kv.key);

describe("put and get", () => {
  const etcd = client();

  it("put then get returns the value with consistent revisions and version", async () => {
    const ns = uniquePrefix("kv-put");
    const first = await etcd.put(`${ns}k`, "v1");
    expect(first.prevKv).toBeUndefined();
    expect(first.header.revision).toBeGreaterThan(0);
    expect(first.header.clusterId).toMatch(/^[0-9]+$/);
    expect(first.header.memberId).toMatch(/^[0-9]+$/);

    const kv1 = await etcd.get(`${ns}k`);
    expect(kv1).toMatchObject({
      key: `${ns}k`,
      value: "v1",
      version: 1,
      createRevision: first.header.revision,
      modRevision: first.header.revision,
      lease: "0",
    });
    expect(kv1!.keyBytes).toEqual(enc(`${ns}k`));
    expect(kv1!.valueBytes).toEqual(enc("v1"));

    const second = await etcd.put(`${ns}k`, "v2");
    expect(second.header.revision).toBeGreaterThan(first.header.revision);
    const kv2 = await etcd.get(`${ns}k`);
    expect(kv2).toMatchObject({
      value: "v2",
      version: 2,
      createRevision: first.header.revision,
      modRevision: second.header.revision,
    });
  });

  it("get of a missing key is undefined", async () => {
    const ns = uniquePrefix("kv-missing");
    expect(await etcd.get(`${ns}nothing`)).toBeUndefined();
    const result = await etcd.range({ key: `${ns}nothing` });
    expect(result).toMatchObject({ kvs: [], count: 0, more: false });
    expect(result.header.revision).toBeGreaterThan(0);
  });

  it("an empty value is stored and read back as empty", async () => {
    const ns = uniquePrefix("kv-empty");
    await etcd.put(`${ns}k`, "");
    const kv = await etcd.get(`${ns}k`);
    expect(kv).toMatchObject({ key: `${ns}k`, value: "", version: 1 });
    expect(kv!.valueBytes).toHaveLength(0);
  });

  it("prevKv returns the previous key-value, and nothing for a new key", async () => {
    const ns = uniquePrefix("kv-prev");
    const created = await etcd.put(`${ns}k`, "old", { prevKv: true });
    expect(created.prevKv).toBeUndefined();
    const updated = await etcd.put(`${ns}k`, "new", { prevKv: true });
    expect(updated.prevKv).toMatchObject({
      key: `${ns}k`,
      value: "old",
      version: 1,
      modRevision: created.header.revision,
      createRevision: created.header.revision,
    });
    // Without prevKv the server sends none.
    expect((await etcd.put(`${ns}k`, "newer")).prevKv).toBeUndefined();
  });

  it("put with a lease attaches it; ignoreValue swaps the lease, ignoreLease swaps the value", async () => {
    const ns = uniquePrefix("kv-lease");
    const a = await etcd.lease.grant(60);
    const b = await etcd.lease.grant(60);
    try {
      await etcd.put(`${ns}k`, "v", { lease: a.id });
      expect(await etcd.get(`${ns}k`)).toMatchObject({ value: "v", lease: a.id });

      // ignoreValue: keep "v", move to lease b.
      const moved = await etcd.put(`${ns}k`, undefined, { ignoreValue: true, lease: b.id, prevKv: true });
      expect(moved.prevKv).toMatchObject({ value: "v", lease: a.id });
      expect(await etcd.get(`${ns}k`)).toMatchObject({ value: "v", lease: b.id, version: 2 });

      // ignoreLease: keep lease b, change the value.
      await etcd.put(`${ns}k`, "w", { ignoreLease: true });
      expect(await etcd.get(`${ns}k`)).toMatchObject({ value: "w", lease: b.id, version: 3 });

      // A plain put detaches the lease.
      await etcd.put(`${ns}k`, "x");
      expect(await etcd.get(`${ns}k`)).toMatchObject({ value: "x", lease: "0" });
      const ttl = await etcd.lease.timeToLive(b.id, { keys: true });
      expect(ttl.keys).toEqual([]);
    } finally {
      await etcd.lease.revoke(a.id);
      await etcd.lease.revoke(b.id);
    }
  });

  it("ignoreValue / ignoreLease on a missing key, and an unknown lease, are server errors with codes", async () => {
    const ns = uniquePrefix("kv-put-errors");
    // etcd: "etcdserver: key not found", gRPC InvalidArgument.
    const ignoreValue = etcd.put(`${ns}missing`, undefined, { ignoreValue: true });
    await expect(ignoreValue).rejects.toBeInstanceOf(EtcdServerError);
    await expect(ignoreValue).rejects.toMatchObject({ code: "INVALID_ARGUMENT", grpcCode: 3, message: expect.stringMatching(/key not found/) });
    await expect(etcd.put(`${ns}missing`, "v", { ignoreLease: true })).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      grpcCode: 3,
      message: expect.stringMatching(/key not found/),
    });
    // etcd: "etcdserver: requested lease not found", gRPC NotFound.
    await expect(etcd.put(`${ns}k`, "v", { lease: "1234567890123" })).rejects.toMatchObject({
      code: "LEASE_NOT_FOUND",
      grpcCode: 5,
    });
    // None of them wrote anything.
    expect((await etcd.range({ prefix: ns })).count).toBe(0);
  });
});

describe("range", () => {
  const etcd = client();

  it("by prefix returns exactly the keys under it, in key order", async () => {
    const ns = uniquePrefix("kv-prefix");
    const outsideBefore = `${ns.slice(0, -1)}.`; // "." < "/"
    const outsideAfter = `${ns.slice(0, -1)}0`; // "0" is the prefix's range end: excluded
    for (const key of [`${ns}c`, `${ns}a`, `${ns}b/deep`, outsideBefore, outsideAfter]) await etcd.put(key, key);
    try {
      const result = await etcd.range({ prefix: ns });
      expect(keysOf(result.kvs)).toEqual([`${ns}a`, `${ns}b/deep`, `${ns}c`]);
      expect(result.kvs.map((kv) => kv.value)).toEqual([`${ns}a`, `${ns}b/deep`, `${ns}c`]);
      expect(result).toMatchObject({ count: 3, more: false });
    } finally {
      await etcd.delete(outsideBefore);
      await etcd.delete(outsideAfter);
    }
  });

  it("by [key, end) includes key and excludes end", async () => {
    const ns = uniquePrefix("kv-interval");
    for (const k of ["a", "b", "c", "d"]) await etcd.put(`${ns}${k}`, k);
    const result = await etcd.range({ key: `${ns}b`, end: `${ns}d` });
    expect(keysOf(result.kvs)).toEqual([`${ns}b`, `${ns}c`]);
    expect(result.count).toBe(2);
  });

  it('end "\\0" reads every key from key on', async () => {
    const ns = uniquePrefix("kv-from");
    for (const k of ["a", "b", "c", "d"]) await etcd.put(`${ns}${k}`, k);
    const result = await etcd.range({ key: `${ns}c`, end: "\0" });
    // The shared member holds other tests' keys after ours: check ours come first and nothing is before `key`.
    expect(keysOf(result.kvs).slice(0, 2)).toEqual([`${ns}c`, `${ns}d`]);
    expect(result.kvs.every((kv) => kv.key >= `${ns}c`)).toBe(true);
    expect(result.count).toBe(result.kvs.length);

    // Under a namespace "from key on" stops at the namespace's end.
    const scoped = client({ namespace: ns });
    await etcd.put(`${ns.slice(0, -1)}0`, "outside");
    try {
      const inside = await scoped.range({ key: "b", end: "\0" });
      expect(keysOf(inside.kvs)).toEqual(["b", "c", "d"]);
    } finally {
      await etcd.delete(`${ns.slice(0, -1)}0`);
    }
  });

  it("limit returns the first keys, with more and the full count", async () => {
    const ns = uniquePrefix("kv-limit");
    for (const k of ["a", "b", "c", "d", "e"]) await etcd.put(`${ns}${k}`, k);
    const limited = await etcd.range({ prefix: ns, limit: 2 });
    expect(keysOf(limited.kvs)).toEqual([`${ns}a`, `${ns}b`]);
    expect(limited).toMatchObject({ count: 5, more: true });
    const exact = await etcd.range({ prefix: ns, limit: 5 });
    expect(exact.kvs).toHaveLength(5);
    expect(exact).toMatchObject({ count: 5, more: false });
    const unlimited = await etcd.range({ prefix: ns, limit: 0 });
    expect(unlimited.kvs).toHaveLength(5);
  });

  it("revision reads the store as it was (historical read)", async () => {
    const ns = uniquePrefix("kv-history");
    const r1 = (await etcd.put(`${ns}k`, "v1")).header.revision;
    const r2 = (await etcd.put(`${ns}k`, "v2")).header.revision;
    await etcd.put(`${ns}later`, "x");
    await etcd.delete(`${ns}k`);

    expect(await etcd.get(`${ns}k`)).toBeUndefined();
    expect(await etcd.get(`${ns}k`, { revision: r1 })).toMatchObject({ value: "v1", version: 1, modRevision: r1 });
    expect(await etcd.get(`${ns}k`, { revision: r2 })).toMatchObject({ value: "v2", version: 2, modRevision: r2 });
    const atR2 = await etcd.range({ prefix: ns, revision: r2 });
    expect(keysOf(atR2.kvs)).toEqual([`${ns}k`]);
    expect(keysOf((await etcd.range({ prefix: ns })).kvs)).toEqual([`${ns}later`]);
  });

  describe("sort, filters, keysOnly, countOnly", () => {
    const ns = uniquePrefix("kv-sort");
    const rev: Record<string, { create: number; mod: number }> = {};
    // Chosen so every sort target gives a different order:
    //   key a,b,c · version (a3,b1,c2) b,c,a · create c,a,b · mod b,a,c · value (a"1",b"3",c"2") a,c,b
    beforeAll(async () => {
      const put = async (k: string, v: string) => {
        const r = (await etcd.put(`${ns}${k}`, v)).header.revision;
        rev[k] = { create: rev[k]?.create ?? r, mod: r };
      };
      await put("c", "2");
      await put("a", "1");
      await put("b", "3");
      await put("a", "1");
      await put("a", "1");
      await put("c", "2");
    });
    const sorted = async (target: "key" | "version" | "createRevision" | "modRevision" | "value", order: "ascend" | "descend") =>
      keysOf((await etcd.range({ prefix: ns, sort: { target, order } })).kvs).map((k) => k.slice(ns.length));

    it.each([
      ["key", "abc"],
      ["version", "bca"],
      ["createRevision", "cab"],
      ["modRevision", "bac"],
      ["value", "acb"],
    ] as const)("sort by %s: ascend %s, descend its reverse", async (target, ascending) => {
      expect((await sorted(target, "ascend")).join("")).toBe(ascending);
      expect((await sorted(target, "descend")).join("")).toBe([...ascending].reverse().join(""));
    });

    it("sort with limit sorts before limiting", async () => {
      const result = await etcd.range({ prefix: ns, sort: { target: "version", order: "descend" }, limit: 1 });
      expect(keysOf(result.kvs)).toEqual([`${ns}a`]);
      expect(result).toMatchObject({ count: 3, more: true });
    });

    it("versions are what the writes made", async () => {
      const kvs = (await etcd.range({ prefix: ns })).kvs;
      expect(kvs.map((kv) => [kv.key.slice(ns.length), kv.version, kv.value])).toEqual([
        ["a", 3, "1"],
        ["b", 1, "3"],
        ["c", 2, "2"],
      ]);
    });

    it("keysOnly returns keys and metadata with empty values", async () => {
      const result = await etcd.range({ prefix: ns, keysOnly: true });
      expect(keysOf(result.kvs)).toEqual([`${ns}a`, `${ns}b`, `${ns}c`]);
      for (const kv of result.kvs) {
        expect(kv.value).toBe("");
        expect(kv.valueBytes).toHaveLength(0);
        expect(kv.version).toBeGreaterThan(0);
      }
    });

    it("countOnly returns no kvs and the right count", async () => {
      const result = await etcd.range({ prefix: ns, countOnly: true });
      expect(result.kvs).toEqual([]);
      expect(result.count).toBe(3);
    });

    it("min/max create and mod revision filters", async () => {
      const only = async (options: Parameters<Etcd["range"]>[0]) =>
        keysOf((await etcd.range(options)).kvs).map((k) => k.slice(ns.length)).join("");
      expect(await only({ prefix: ns, minCreateRevision: rev.a!.create })).toBe("ab");
      expect(await only({ prefix: ns, maxCreateRevision: rev.a!.create })).toBe("ac");
      expect(await only({ prefix: ns, minModRevision: rev.a!.mod })).toBe("ac");
      expect(await only({ prefix: ns, maxModRevision: rev.a!.mod })).toBe("ab");
      expect(await only({ prefix: ns, minCreateRevision: rev.a!.create, maxCreateRevision: rev.a!.create })).toBe("a");
      expect(await only({ prefix: ns, minModRevision: rev.c!.mod + 1 })).toBe("");
    });

    it("serializable reads return the data too", async () => {
      const result = await etcd.range({ prefix: ns, serializable: true });
      expect(keysOf(result.kvs)).toEqual([`${ns}a`, `${ns}b`, `${ns}c`]);
      expect(await etcd.get(`${ns}b`, { serializable: true })).toMatchObject({ value: "3" });
    });
  });
});

describe("bytes", () => {
  const etcd = client();

  it("Uint8Array keys and values with non-UTF-8 bytes round-trip exactly", async () => {
    const ns = enc(uniquePrefix("kv-bytes"));
    const key = new Uint8Array([...ns, 0xff, 0x00, 0xc3, 0x28, 0x80]);
    const value = bytes(0x80, 0x00, 0xfe, 0xff, 0xc0, 0xaf);
    await etcd.put(key, value);
    const kv = await etcd.get(key);
    expect(kv).toBeDefined();
    expect(kv!.keyBytes).toEqual(key);
    expect(kv!.valueBytes).toEqual(value);
    // Found by a prefix of bytes too, and the text forms are lossy-decoded, not the source of truth.
    const listed = await etcd.range({ prefix: ns });
    expect(listed.kvs.map((x) => x.keyBytes)).toEqual([key]);
    // A string that is not the same bytes does not find it.
    expect(await etcd.get(kv!.key)).toBeUndefined();
  });

  it("a prefix of only 0xff bytes has an open end: a key 0xff 0xff + suffix is found", async () => {
    const suffix = enc(uniquePrefix("kv-ffff"));
    const key = new Uint8Array([0xff, 0xff, ...suffix]);
    const nearMiss = new Uint8Array([0xff, 0xfe, ...suffix]);
    await etcd.put(key, "found");
    await etcd.put(nearMiss, "not me");
    try {
      const result = await etcd.range({ prefix: bytes(0xff, 0xff) });
      const found = result.kvs.filter((kv) => Buffer.from(kv.keyBytes).equals(Buffer.from(key)));
      expect(found).toHaveLength(1);
      expect(found[0]!.value).toBe("found");
      for (const kv of result.kvs) expect([...kv.keyBytes.subarray(0, 2)]).toEqual([0xff, 0xff]);
      expect(result.kvs.some((kv) => Buffer.from(kv.keyBytes).equals(Buffer.from(nearMiss)))).toBe(false);
      // A single 0xff byte prefix covers both.
      const wider = await etcd.range({ prefix: bytes(0xff) });
      expect(wider.kvs.filter((kv) => kv.keyBytes.length === key.length && kv.keyBytes[2] === suffix[0]).length).toBeGreaterThanOrEqual(2);
    } finally {
      await etcd.delete(key);
      await etcd.delete(nearMiss);
    }
  });

  it("a 0xff prefix under a namespace stays inside the namespace", async () => {
    const ns = uniquePrefix("kv-ns-ff");
    const scoped = client({ namespace: ns });
    const plain = client();
    await scoped.put(bytes(0xff, 0xff, 0x01), "in");
    await scoped.put(bytes(0xff, 0xfe), "below");
    await plain.put(`${ns.slice(0, -1)}0`, "after the namespace");
    try {
      const result = await scoped.range({ prefix: bytes(0xff, 0xff) });
      expect(result.kvs.map((kv) => [...kv.keyBytes])).toEqual([[0xff, 0xff, 0x01]]);
    } finally {
      await plain.delete(`${ns.slice(0, -1)}0`);
    }
  });
});

describe("namespace option", () => {
  it("prefixes keys on the way out and strips them on the way back", async () => {
    const ns = uniquePrefix("kv-ns");
    const scoped = client({ namespace: ns });
    const plain = client();

    const put = await scoped.put("a", "1", { prevKv: true });
    expect(put.prevKv).toBeUndefined();
    expect(await plain.get(`${ns}a`)).toMatchObject({ key: `${ns}a`, value: "1" });
    expect(await plain.get("a")).toBeUndefined();
    const mine = await scoped.get("a");
    expect(mine).toMatchObject({ key: "a", value: "1" });
    expect(mine!.keyBytes).toEqual(enc("a"));

    await plain.put(`${ns}b`, "2");
    const sibling = `${ns.slice(0, -1)}0`;
    await plain.put(sibling, "outside");
    try {
      const all = await scoped.range({ prefix: "" });
      expect(keysOf(all.kvs)).toEqual(["a", "b"]);
      expect(all.count).toBe(2);

      const overwritten = await scoped.put("b", "3", { prevKv: true });
      expect(overwritten.prevKv).toMatchObject({ key: "b", value: "2" });

      const deleted = await scoped.delete({ prefix: "", prevKv: true });
      expect(deleted.deleted).toBe(2);
      expect(keysOf(deleted.prevKvs)).toEqual(["a", "b"]);
      expect(await plain.get(sibling)).toMatchObject({ value: "outside" });
      expect((await plain.range({ prefix: ns })).count).toBe(0);
    } finally {
      await plain.delete(sibling);
    }
  });
});

describe("delete", () => {
  const etcd = client();

  it("by key, with and without prevKv; a missing key deletes nothing", async () => {
    const ns = uniquePrefix("kv-del");
    const put = await etcd.put(`${ns}k`, "v");
    const result = await etcd.delete(`${ns}k`, { prevKv: true });
    expect(result.deleted).toBe(1);
    expect(result.prevKvs).toHaveLength(1);
    expect(result.prevKvs[0]).toMatchObject({ key: `${ns}k`, value: "v", modRevision: put.header.revision });
    expect(result.header.revision).toBeGreaterThan(put.header.revision);
    expect(await etcd.get(`${ns}k`)).toBeUndefined();

    const again = await etcd.delete(`${ns}k`);
    expect(again).toMatchObject({ deleted: 0, prevKvs: [] });

    await etcd.put(`${ns}k2`, "v");
    expect(await etcd.delete(`${ns}k2`)).toMatchObject({ deleted: 1, prevKvs: [] });
  });

  it("by prefix and by range, with prevKv", async () => {
    const ns = uniquePrefix("kv-del-range");
    for (const k of ["a", "b", "c", "d", "e"]) await etcd.put(`${ns}${k}`, k.toUpperCase());
    const sibling = `${ns.slice(0, -1)}0`;
    await etcd.put(sibling, "keep");
    try {
      const ranged = await etcd.delete({ key: `${ns}b`, end: `${ns}d`, prevKv: true });
      expect(ranged.deleted).toBe(2);
      expect(ranged.prevKvs.map((kv) => [kv.key, kv.value])).toEqual([
        [`${ns}b`, "B"],
        [`${ns}c`, "C"],
      ]);
      expect(keysOf((await etcd.range({ prefix: ns })).kvs)).toEqual([`${ns}a`, `${ns}d`, `${ns}e`]);

      // prevKv as a separate options argument works the same.
      const prefixed = await etcd.delete({ prefix: ns }, { prevKv: true });
      expect(prefixed.deleted).toBe(3);
      expect(keysOf(prefixed.prevKvs)).toEqual([`${ns}a`, `${ns}d`, `${ns}e`]);
      expect((await etcd.range({ prefix: ns })).count).toBe(0);
      expect(await etcd.get(sibling)).toMatchObject({ value: "keep" });
    } finally {
      await etcd.delete(sibling);
    }
  });
});

describe("revisions out of range", () => {
  it("a future revision is FUTURE_REVISION", async () => {
    const etcd = client();
    const ns = uniquePrefix("kv-future");
    const { header } = await etcd.put(`${ns}k`, "v");
    await expect(etcd.get(`${ns}k`, { revision: header.revision + 1_000_000 })).rejects.toMatchObject({
      code: "FUTURE_REVISION",
      grpcCode: 11,
    });
  });

  describe("compaction (dedicated member: compacting the shared one would break other files)", () => {
    let member: EtcdMember;
    let etcd: Etcd;
    beforeAll(async () => {
      member = await startEtcd();
      etcd = new Etcd({ endpoints: member.clientUrl, timeout: 5_000 });
    });
    afterAll(async () => {
      await member?.stop();
    });

    it("compact then a historical read is COMPACTED; reads at or after it still work", async () => {
      const r1 = (await etcd.put("k", "v1")).header.revision;
      const r2 = (await etcd.put("k", "v2")).header.revision;
      const r3 = (await etcd.put("k", "v3")).header.revision;
      const compacted = await etcd.compact(r2, { physical: true });
      expect(compacted.header.revision).toBe(r3);

      const old = etcd.get("k", { revision: r1 });
      await expect(old).rejects.toBeInstanceOf(EtcdCompactedError);
      await expect(old).rejects.toMatchObject({ code: "COMPACTED" });
      expect(await etcd.get("k", { revision: r2 })).toMatchObject({ value: "v2" });
      expect(await etcd.get("k")).toMatchObject({ value: "v3" });

      // Compacting again at or below the compacted revision is refused the same way.
      await expect(etcd.compact(r1)).rejects.toMatchObject({ code: "COMPACTED" });
      // Compacting past the current revision is a future revision.
      await expect(etcd.compact(r3 + 100)).rejects.toMatchObject({ code: "FUTURE_REVISION" });
    });
  });
});

describe("INVALID_ARGUMENT before any request", () => {
  const fetch = forbiddenFetch();
  const etcd = new Etcd({ endpoints: "http://127.0.0.1:9", fetch });

  it.each([
    ["get with an empty key", () => etcd.get("")],
    ["put with an empty key", () => etcd.put("", "v")],
    ["put with an empty Uint8Array key", () => etcd.put(new Uint8Array(0), "v")],
    ["put without a value", () => etcd.put("k", undefined)],
    ["put with ignoreValue and a value", () => etcd.put("k", "v", { ignoreValue: true })],
    ["put with ignoreLease and a lease", () => etcd.put("k", "v", { ignoreLease: true, lease: "7" })],
    ["put with a non-decimal lease", () => etcd.put("k", "v", { lease: "abc" })],
    ["put with a negative lease", () => etcd.put("k", "v", { lease: "-1" })],
    ["put with a lease beyond int64", () => etcd.put("k", "v", { lease: "9223372036854775808" })],
    ["put with a numeric lease", () => etcd.put("k", "v", { lease: 5 as unknown as string })],
    ["range with a negative limit", () => etcd.range({ prefix: "p", limit: -1 })],
    ["range with a fractional limit", () => etcd.range({ prefix: "p", limit: 1.5 })],
    ["range with a negative revision", () => etcd.range({ key: "k", revision: -3 })],
    ["range with an unknown sort target", () => etcd.range({ prefix: "p", sort: { target: "size" as "key" } })],
    ["range with an empty start key", () => etcd.range({ key: "", end: "z" })],
    ["range with a non-object", () => etcd.range(42 as unknown as { key: string })],
    ["delete with an empty key", () => etcd.delete("")],
    ["compact with a negative revision", () => etcd.compact(-1)],
    ["lease grant with ttl 0", () => etcd.lease.grant(0)],
    ["lease grant with a fractional ttl", () => etcd.lease.grant(1.5)],
    ["lease grant with a bad id", () => etcd.lease.grant(10, { id: "0x10" })],
    ["lease revoke with a bad id", () => etcd.lease.revoke("12a")],
    ["lease keepAliveOnce with an empty id", () => etcd.lease.keepAliveOnce("")],
    ["lease timeToLive with a bad id", () => etcd.lease.timeToLive("-5")],
  ])("%s", async (_, call) => {
    const before = fetch.calls;
    const promise = call();
    await expect(promise).rejects.toBeInstanceOf(EtcdError);
    await expect(promise).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    expect(fetch.calls).toBe(before);
  });

  it("watch with an empty key throws at the call", () => {
    expect(() => etcd.watch({ key: "" })).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT" }));
    expect(fetch.calls).toBe(0);
  });
});
