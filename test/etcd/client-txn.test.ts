// Transactions over a real etcd: every compare target and operator, ranges, typed responses, errors.
import { describe, expect, it } from "vitest";
import { cmp, type Compare, op } from "../../src/index.js";
import { client, uniquePrefix } from "./support";

const etcd = client();

/** Whether the compares hold, as etcd decides (then-branch taken or not). */
async function holds(...compares: Compare[]): Promise<boolean> {
  return (await etcd.txn().if(...compares).commit()).succeeded;
}

describe("compares", () => {
  it("value with each operator (bytewise)", async () => {
    const ns = uniquePrefix("txn-value");
    const k = `${ns}k`;
    await etcd.put(k, "m");
    expect(await holds(cmp.value(k, "==", "m"))).toBe(true);
    expect(await holds(cmp.value(k, "==", "n"))).toBe(false);
    expect(await holds(cmp.value(k, "!=", "n"))).toBe(true);
    expect(await holds(cmp.value(k, "!=", "m"))).toBe(false);
    expect(await holds(cmp.value(k, "<", "n"))).toBe(true);
    expect(await holds(cmp.value(k, "<", "m"))).toBe(false);
    expect(await holds(cmp.value(k, ">", "l"))).toBe(true);
    expect(await holds(cmp.value(k, ">", "mm"))).toBe(false);
    // Bytes, not text: 0xff sorts after every ASCII value.
    await etcd.put(k, new Uint8Array([0xff]));
    expect(await holds(cmp.value(k, ">", "zzz"))).toBe(true);
    expect(await holds(cmp.value(k, "==", new Uint8Array([0xff])))).toBe(true);
  });

  it("version with each operator", async () => {
    const ns = uniquePrefix("txn-version");
    const k = `${ns}k`;
    await etcd.put(k, "1");
    await etcd.put(k, "2"); // version 2
    expect(await holds(cmp.version(k, "==", 2))).toBe(true);
    expect(await holds(cmp.version(k, "==", 1))).toBe(false);
    expect(await holds(cmp.version(k, "!=", 1))).toBe(true);
    expect(await holds(cmp.version(k, "!=", 2))).toBe(false);
    expect(await holds(cmp.version(k, "<", 3))).toBe(true);
    expect(await holds(cmp.version(k, "<", 2))).toBe(false);
    expect(await holds(cmp.version(k, ">", 1))).toBe(true);
    expect(await holds(cmp.version(k, ">", 2))).toBe(false);
  });

  it("createRevision and modRevision with each operator", async () => {
    const ns = uniquePrefix("txn-revs");
    const k = `${ns}k`;
    const created = (await etcd.put(k, "1")).header.revision;
    const modified = (await etcd.put(k, "2")).header.revision;
    for (const [compare, rev] of [
      [cmp.createRevision, created],
      [cmp.modRevision, modified],
    ] as const) {
      expect(await holds(compare(k, "==", rev))).toBe(true);
      expect(await holds(compare(k, "==", rev + 1))).toBe(false);
      expect(await holds(compare(k, "!=", rev + 1))).toBe(true);
      expect(await holds(compare(k, "!=", rev))).toBe(false);
      expect(await holds(compare(k, "<", rev + 1))).toBe(true);
      expect(await holds(compare(k, "<", rev))).toBe(false);
      expect(await holds(compare(k, ">", rev - 1))).toBe(true);
      expect(await holds(compare(k, ">", rev))).toBe(false);
    }
    expect(created).toBeLessThan(modified);
    expect(await holds(cmp.createRevision(k, "==", created), cmp.modRevision(k, "==", modified))).toBe(true);
  });

  it("lease with each operator; a key without lease has lease 0", async () => {
    const ns = uniquePrefix("txn-lease");
    const k = `${ns}k`;
    const plain = `${ns}plain`;
    const lease = await etcd.lease.grant(60);
    try {
      await etcd.put(k, "v", { lease: lease.id });
      await etcd.put(plain, "v");
      const other = (BigInt(lease.id) + 1n).toString();
      const lower = (BigInt(lease.id) - 1n).toString();
      expect(await holds(cmp.lease(k, "==", lease.id))).toBe(true);
      expect(await holds(cmp.lease(k, "==", other))).toBe(false);
      expect(await holds(cmp.lease(k, "!=", other))).toBe(true);
      expect(await holds(cmp.lease(k, "!=", lease.id))).toBe(false);
      expect(await holds(cmp.lease(k, "<", other))).toBe(true);
      expect(await holds(cmp.lease(k, "<", lease.id))).toBe(false);
      expect(await holds(cmp.lease(k, ">", lower))).toBe(true);
      expect(await holds(cmp.lease(k, ">", lease.id))).toBe(false);
      expect(await holds(cmp.lease(plain, "==", "0"))).toBe(true);
      expect(await holds(cmp.lease(plain, "==", lease.id))).toBe(false);
    } finally {
      await etcd.lease.revoke(lease.id);
    }
  });

  it("a missing key has version, create and mod revision 0 and no lease", async () => {
    const ns = uniquePrefix("txn-missing");
    const k = `${ns}missing`;
    expect(await holds(cmp.version(k, "==", 0))).toBe(true);
    expect(await holds(cmp.version(k, ">", 0))).toBe(false);
    expect(await holds(cmp.createRevision(k, "==", 0))).toBe(true);
    expect(await holds(cmp.modRevision(k, "==", 0))).toBe(true);
    expect(await holds(cmp.lease(k, "==", "0"))).toBe(true);
    // Not "an empty value": etcd fails every value compare on a missing key.
    expect(await holds(cmp.value(k, "==", ""))).toBe(false);
    expect(await holds(cmp.value(k, "!=", ""))).toBe(false);
    expect(await holds(cmp.value(k, "<", "z"))).toBe(false);
    await etcd.put(k, "now it exists");
    expect(await holds(cmp.version(k, "==", 0))).toBe(false);
    expect(await holds(cmp.createRevision(k, "==", 0))).toBe(false);
  });

  it("over a prefix or [key, end), every key must satisfy the compare", async () => {
    const ns = uniquePrefix("txn-range");
    await etcd.put(`${ns}a`, "ok");
    await etcd.put(`${ns}b`, "ok");
    await etcd.put(`${ns}c`, "bad");
    expect(await holds(cmp.value({ prefix: ns }, "==", "ok"))).toBe(false);
    expect(await holds(cmp.value({ key: `${ns}a`, end: `${ns}c` }, "==", "ok"))).toBe(true);
    expect(await holds(cmp.value({ key: `${ns}a`, end: `${ns}d` }, "==", "ok"))).toBe(false);
    expect(await holds(cmp.version({ prefix: ns }, ">", 0))).toBe(true);
    expect(await holds(cmp.version({ prefix: ns }, "==", 1))).toBe(true);
    await etcd.put(`${ns}b`, "ok"); // b now version 2
    expect(await holds(cmp.version({ prefix: ns }, "==", 1))).toBe(false);
    expect(await holds(cmp.version({ key: `${ns}b`, end: `${ns}c` }, "==", 2))).toBe(true);
    // A range with no keys: etcd compares a zero key-value, so version 0 holds...
    const empty = uniquePrefix("txn-range-empty");
    expect(await holds(cmp.version({ prefix: empty }, "==", 0))).toBe(true);
    // ...but a value compare on missing keys always fails, whatever the operator (etcd's applyCompare).
    expect(await holds(cmp.value({ prefix: empty }, "==", ""))).toBe(false);
    expect(await holds(cmp.value({ prefix: empty }, "!=", "x"))).toBe(false);
  });

  it("several compares must all hold", async () => {
    const ns = uniquePrefix("txn-and");
    await etcd.put(`${ns}a`, "1");
    expect(await holds(cmp.value(`${ns}a`, "==", "1"), cmp.version(`${ns}b`, "==", 0))).toBe(true);
    expect(await holds(cmp.value(`${ns}a`, "==", "1"), cmp.version(`${ns}a`, "==", 0))).toBe(false);
    // No compares at all: always succeeds.
    expect(await holds()).toBe(true);
  });
});

describe("then / else", () => {
  it("then-branch: typed responses of get, put, delete and a nested txn, applied in one revision", async () => {
    const ns = uniquePrefix("txn-then");
    await etcd.put(`${ns}read`, "r");
    await etcd.put(`${ns}old`, "o");
    const before = (await etcd.put(`${ns}del/1`, "d1")).header.revision;
    await etcd.put(`${ns}del/2`, "d2");

    const result = await etcd
      .txn()
      .if(cmp.version(`${ns}new`, "==", 0))
      .then(
        op.get(`${ns}read`),
        op.put(`${ns}old`, "o2", { prevKv: true }),
        op.put(`${ns}new`, "n"),
        op.delete({ prefix: `${ns}del/`, prevKv: true }),
        op.get({ prefix: ns, countOnly: true }),
        // Nested compares are evaluated against the store before the outer txn's writes: `new` is still missing.
        // `as const`: op.txn infers plain arrays as arrays, not tuples (see report), so the responses would be untyped.
        op.txn([cmp.version(`${ns}new`, "==", 0)], [op.get(`${ns}new`), op.put(`${ns}nested`, "x")] as const, [op.get(`${ns}read`)] as const),
      )
      .else(op.get(`${ns}new`))
      .commit();

    expect(result.succeeded).toBe(true);
    if (!result.succeeded) throw new Error("unreachable");
    const [read, putOld, putNew, deleted, counted, nested] = result.responses;
    const rev = result.header.revision;
    expect(rev).toBeGreaterThan(before);

    expect(read.kvs.map((kv) => [kv.key, kv.value])).toEqual([[`${ns}read`, "r"]]);
    expect(read.count).toBe(1);
    expect(read.more).toBe(false);
    expect(putOld.prevKv).toMatchObject({ key: `${ns}old`, value: "o", version: 1 });
    expect(putNew.prevKv).toBeUndefined();
    expect(putNew.header.revision).toBe(rev);
    expect(deleted.deleted).toBe(2);
    expect(deleted.prevKvs.map((kv) => kv.value)).toEqual(["d1", "d2"]);
    // Ops see the earlier ops of the same txn: read, old, new, nested-not-yet = 3 keys.
    expect(counted.kvs).toEqual([]);
    expect(counted.count).toBe(3);
    expect(nested.succeeded).toBe(true);
    if (!nested.succeeded) throw new Error("unreachable");
    const [nestedGet, nestedPut] = nested.responses;
    expect(nestedGet.kvs[0]).toMatchObject({ key: `${ns}new`, value: "n", createRevision: rev, modRevision: rev });
    expect(nestedPut.prevKv).toBeUndefined();

    // Every write of the txn carries the one revision.
    const after = await etcd.range({ prefix: ns });
    expect(after.kvs.map((kv) => [kv.key.slice(ns.length), kv.value])).toEqual([
      ["nested", "x"],
      ["new", "n"],
      ["old", "o2"],
      ["read", "r"],
    ]);
    for (const kv of after.kvs.filter((kv) => kv.key !== `${ns}read`)) expect(kv.modRevision).toBe(rev);
  });

  it("else-branch: succeeded false, only else ops run, their responses typed", async () => {
    const ns = uniquePrefix("txn-else");
    await etcd.put(`${ns}k`, "current");
    const result = await etcd
      .txn()
      .if(cmp.value(`${ns}k`, "==", "expected"))
      .then(op.put(`${ns}k`, "overwritten"), op.put(`${ns}then-marker`, "x"))
      .else(op.get(`${ns}k`), op.put(`${ns}else-marker`, "y", { prevKv: true }), op.delete(`${ns}nothing`))
      .commit();
    expect(result.succeeded).toBe(false);
    if (result.succeeded) throw new Error("unreachable");
    expect(result.responses).toHaveLength(3);
    const [got, put, deleted] = result.responses;
    expect(got.kvs[0]).toMatchObject({ key: `${ns}k`, value: "current" });
    expect(put.prevKv).toBeUndefined();
    expect(put.header.revision).toBe(result.header.revision);
    expect(deleted).toMatchObject({ deleted: 0, prevKvs: [] });

    expect(await etcd.get(`${ns}k`)).toMatchObject({ value: "current" });
    expect(await etcd.get(`${ns}then-marker`)).toBeUndefined();
    expect(await etcd.get(`${ns}else-marker`)).toMatchObject({ value: "y" });
  });

  it("a failed txn with no else ops returns succeeded false and no responses, writes nothing", async () => {
    const ns = uniquePrefix("txn-fail");
    const result = await etcd.txn().if(cmp.version(`${ns}k`, ">", 0)).then(op.put(`${ns}k`, "v")).commit();
    expect(result).toMatchObject({ succeeded: false, responses: [] });
    expect(await etcd.get(`${ns}k`)).toBeUndefined();
  });

  it("a nested txn's else branch and failure are reported", async () => {
    const ns = uniquePrefix("txn-nested-else");
    const result = await etcd
      .txn()
      .then(op.txn([cmp.version(`${ns}x`, ">", 0)], [op.put(`${ns}then`, "1")] as const, [op.put(`${ns}else`, "2"), op.get(`${ns}else`)] as const))
      .commit();
    expect(result.succeeded).toBe(true);
    if (!result.succeeded) throw new Error("unreachable");
    const [nested] = result.responses;
    expect(nested.succeeded).toBe(false);
    if (nested.succeeded) throw new Error("unreachable");
    expect(nested.responses[1].kvs[0]).toMatchObject({ key: `${ns}else`, value: "2" });
    expect(await etcd.get(`${ns}then`)).toBeUndefined();
  });

  it("a namespaced client's txn uses the namespace in compares, ops and responses", async () => {
    const ns = uniquePrefix("txn-ns");
    const scoped = client({ namespace: ns });
    const result = await scoped
      .txn()
      .if(cmp.version("k", "==", 0))
      .then(op.put("k", "v"), op.get({ prefix: "" }))
      .commit();
    expect(result.succeeded).toBe(true);
    if (!result.succeeded) throw new Error("unreachable");
    expect(result.responses[1].kvs.map((kv) => kv.key)).toEqual(["k"]);
    expect(await etcd.get(`${ns}k`)).toMatchObject({ value: "v" });
    expect(await scoped.txn().if(cmp.value("k", "==", "v")).commit()).toMatchObject({ succeeded: true });
  });
});

describe("fenced write", () => {
  it("createRevision fencing: only the holder of the current incarnation may write", async () => {
    const ns = uniquePrefix("txn-fence");
    const lockKey = `${ns}lock`;
    const guarded = `${ns}data`;

    // Holder A creates the lock key and remembers its create revision (its fencing token).
    const acquireA = await etcd
      .txn()
      .if(cmp.createRevision(lockKey, "==", 0))
      .then(op.put(lockKey, "A"))
      .else(op.get(lockKey))
      .commit();
    expect(acquireA.succeeded).toBe(true);
    const tokenA = acquireA.header.revision;

    const writeA = await etcd.txn().if(cmp.createRevision(lockKey, "==", tokenA)).then(op.put(guarded, "by A")).commit();
    expect(writeA.succeeded).toBe(true);

    // The lock is lost (deleted) and B takes it: same key, new create revision.
    await etcd.delete(lockKey);
    const acquireB = await etcd.txn().if(cmp.createRevision(lockKey, "==", 0)).then(op.put(lockKey, "B")).commit();
    expect(acquireB.succeeded).toBe(true);
    const tokenB = acquireB.header.revision;
    expect(tokenB).toBeGreaterThan(tokenA);

    // A second acquire by anyone fails and reports the holder.
    const contender = await etcd.txn().if(cmp.createRevision(lockKey, "==", 0)).then(op.put(lockKey, "C")).else(op.get(lockKey)).commit();
    expect(contender.succeeded).toBe(false);
    if (contender.succeeded) throw new Error("unreachable");
    expect(contender.responses[0].kvs[0]).toMatchObject({ value: "B", createRevision: tokenB });

    // A's stale write is fenced off; B's goes through.
    const staleA = await etcd.txn().if(cmp.createRevision(lockKey, "==", tokenA)).then(op.put(guarded, "stale A")).commit();
    expect(staleA.succeeded).toBe(false);
    const writeB = await etcd.txn().if(cmp.createRevision(lockKey, "==", tokenB)).then(op.put(guarded, "by B")).commit();
    expect(writeB.succeeded).toBe(true);
    expect(await etcd.get(guarded)).toMatchObject({ value: "by B", version: 2 });
  });
});

describe("server-side txn errors", () => {
  it("more than 128 operations is INVALID_ARGUMENT from the server; nothing applied", async () => {
    const ns = uniquePrefix("txn-too-many");
    const ops = Array.from({ length: 129 }, (_, i) => op.put(`${ns}${String(i).padStart(3, "0")}`, "v"));
    await expect(etcd.txn().then(...ops).commit()).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      grpcCode: 3,
      message: expect.stringMatching(/too many operations/),
    });
    expect((await etcd.range({ prefix: ns })).count).toBe(0);
    // 128 is allowed.
    const ok = await etcd.txn().then(...ops.slice(0, 128)).commit();
    expect(ok.succeeded).toBe(true);
    expect((await etcd.range({ prefix: ns, countOnly: true })).count).toBe(128);
  });

  it("two puts of one key in a txn is INVALID_ARGUMENT (duplicate key); nothing applied", async () => {
    const ns = uniquePrefix("txn-dup");
    await expect(etcd.txn().then(op.put(`${ns}k`, "1"), op.put(`${ns}k`, "2")).commit()).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      grpcCode: 3,
      message: expect.stringMatching(/duplicate key/),
    });
    // A put and a delete that covers the same key are duplicates too.
    await expect(
      etcd.txn().then(op.put(`${ns}k`, "1"), op.delete({ prefix: ns })).commit(),
    ).rejects.toMatchObject({ code: "INVALID_ARGUMENT", message: expect.stringMatching(/duplicate key/) });
    expect(await etcd.get(`${ns}k`)).toBeUndefined();
  });

  it("a put with ignoreValue on a missing key inside a txn fails the whole txn", async () => {
    const ns = uniquePrefix("txn-ignore-missing");
    await expect(
      etcd.txn().then(op.put(`${ns}other`, "x"), op.put(`${ns}missing`, undefined, { ignoreValue: true })).commit(),
    ).rejects.toMatchObject({ code: "INVALID_ARGUMENT", message: expect.stringMatching(/key not found/) });
    expect(await etcd.get(`${ns}other`)).toBeUndefined();
  });
});

describe("builder misuse is INVALID_ARGUMENT", () => {
  it("if/then/else out of order or twice", () => {
    expect(() => etcd.txn().then().if()).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT" }));
    expect(() => etcd.txn().if().if()).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT" }));
    expect(() => etcd.txn().else().then()).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT" }));
  });
});
