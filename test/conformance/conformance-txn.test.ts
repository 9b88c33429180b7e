// Transaction conformance on the mock and on real etcd: compares, missing keys, ranges, nesting, responses,
// fencing, errors.
import { describe, expect, it } from "vitest";
import { cmp, type Compare, op, type RangeResult } from "../../src/index.js";
import { rejection } from "../support/async.js";
import { freshNames } from "../support/etcd.js";
import { useBackend } from "./backend.js";

const { backend, etcd } = useBackend();

const fresh = freshNames("txn", "/");

/** Whether the compare holds, by a read-only txn. */
async function holds(...compares: Compare[]): Promise<boolean> {
  return (
    await etcd
      .txn()
      .if(...compares)
      .commit()
  ).succeeded;
}

describe("compare targets × operators on an existing key", () => {
  it("value, version, createRevision, modRevision, lease with ==, !=, <, >", async () => {
    const p = fresh();
    const lease = await etcd.lease.grant(60);
    try {
      const created = (await etcd.put(`${p}k`, "m")).header.revision;
      const modified = (await etcd.put(`${p}k`, "m", { lease: lease.id })).header.revision; // version 2
      const k = `${p}k`;
      const leaseId = BigInt(lease.id);
      const table: Array<[Compare, boolean]> = [
        [cmp.value(k, "==", "m"), true],
        [cmp.value(k, "!=", "m"), false],
        [cmp.value(k, "<", "n"), true],
        [cmp.value(k, "<", "m"), false],
        [cmp.value(k, ">", "l"), true],
        [cmp.value(k, ">", "mm"), false],
        [cmp.value(k, ">", ""), true],
        [cmp.version(k, "==", 2), true],
        [cmp.version(k, "!=", 2), false],
        [cmp.version(k, "<", 3), true],
        [cmp.version(k, ">", 1), true],
        [cmp.version(k, ">", 2), false],
        [cmp.createRevision(k, "==", created), true],
        [cmp.createRevision(k, "!=", created), false],
        [cmp.createRevision(k, "<", created + 1), true],
        [cmp.createRevision(k, ">", created - 1), true],
        [cmp.createRevision(k, ">", created), false],
        [cmp.modRevision(k, "==", modified), true],
        [cmp.modRevision(k, "!=", modified), false],
        [cmp.modRevision(k, "<", modified), false],
        [cmp.modRevision(k, ">", created), true],
        [cmp.lease(k, "==", lease.id), true],
        [cmp.lease(k, "!=", lease.id), false],
        [cmp.lease(k, "!=", "0"), true],
        [cmp.lease(k, "<", (leaseId + 1n).toString()), true],
        [cmp.lease(k, ">", (leaseId - 1n).toString()), true],
        [cmp.lease(k, ">", lease.id), false],
      ];
      const results = await Promise.all(table.map(([c]) => holds(c)));
      expect(results).toEqual(table.map(([, want]) => want));
    } finally {
      await etcd.lease.revoke(lease.id).catch(() => {});
    }
  });

  it("value compares are bytewise", async () => {
    const p = fresh();
    await etcd.put(`${p}k`, new Uint8Array([0x80]));
    expect(await holds(cmp.value(`${p}k`, ">", new Uint8Array([0x7f, 0xff])))).toBe(true);
    expect(await holds(cmp.value(`${p}k`, "<", new Uint8Array([0x80, 0x00])))).toBe(true);
    expect(await holds(cmp.value(`${p}k`, "==", new Uint8Array([0x80])))).toBe(true);
  });
});

describe("a missing key", () => {
  it("compares as version/create/mod 0 and lease 0; every value compare fails, even !=", async () => {
    const k = `${fresh()}missing`;
    const table: Array<[Compare, boolean]> = [
      [cmp.version(k, "==", 0), true],
      [cmp.version(k, ">", 0), false],
      [cmp.version(k, "<", 1), true],
      [cmp.createRevision(k, "==", 0), true],
      [cmp.createRevision(k, "!=", 0), false],
      [cmp.modRevision(k, "==", 0), true],
      [cmp.modRevision(k, "<", 5), true],
      [cmp.lease(k, "==", "0"), true],
      [cmp.lease(k, "!=", "0"), false],
      [cmp.value(k, "==", ""), false],
      [cmp.value(k, "!=", ""), false],
      [cmp.value(k, "!=", "x"), false],
      [cmp.value(k, "<", "x"), false],
      [cmp.value(k, ">", ""), false],
    ];
    const results = await Promise.all(table.map(([c]) => holds(c)));
    expect(results).toEqual(table.map(([, want]) => want));
  });

  it("a deleted key is missing again", async () => {
    const k = `${fresh()}k`;
    await etcd.put(k, "v");
    await etcd.delete(k);
    expect(await holds(cmp.version(k, "==", 0), cmp.createRevision(k, "==", 0))).toBe(true);
    expect(await holds(cmp.value(k, "==", "v"))).toBe(false);
  });
});

describe("range compares", () => {
  it("every key in the range must satisfy the compare; an empty range compares as a missing key", async () => {
    const p = fresh();
    await etcd.put(`${p}a`, "1");
    await etcd.put(`${p}b`, "1");
    const rc = (await etcd.put(`${p}c`, "1")).header.revision;
    expect(await holds(cmp.value({ prefix: p }, "==", "1"))).toBe(true);
    expect(await holds(cmp.version({ prefix: p }, "==", 1))).toBe(true);
    expect(await holds(cmp.createRevision({ prefix: p }, "<", rc + 1))).toBe(true);
    expect(await holds(cmp.createRevision({ prefix: p }, "<", rc))).toBe(false);
    await etcd.put(`${p}b`, "2");
    expect(await holds(cmp.value({ prefix: p }, "==", "1"))).toBe(false);
    expect(await holds(cmp.value({ key: `${p}a`, end: `${p}b` }, "==", "1"))).toBe(true);
    expect(await holds(cmp.value({ key: `${p}c`, end: "\0" }, "==", "1"))).toBe(true);
    expect(await holds(cmp.version({ prefix: p }, ">", 0))).toBe(true);
    // Empty ranges: as one missing key.
    expect(await holds(cmp.version({ prefix: `${p}none/` }, "==", 0))).toBe(true);
    expect(await holds(cmp.value({ prefix: `${p}none/` }, "!=", "x"))).toBe(false);
  });

  it("several compares are ANDed", async () => {
    const p = fresh();
    await etcd.put(`${p}a`, "1");
    expect(await holds(cmp.value(`${p}a`, "==", "1"), cmp.version(`${p}b`, "==", 0))).toBe(true);
    expect(await holds(cmp.value(`${p}a`, "==", "1"), cmp.version(`${p}a`, "==", 0))).toBe(false);
    expect(await holds()).toBe(true);
  });
});

describe("branches, responses, revisions", () => {
  it("then runs on success, else on failure; responses are typed per operation", async () => {
    const p = fresh();
    await etcd.put(`${p}x`, "old");
    const ok = await etcd
      .txn()
      .if(cmp.value(`${p}x`, "==", "old"))
      .then(
        op.put(`${p}x`, "new", { prevKv: true }),
        op.get({ prefix: p }),
        op.delete({ key: `${p}nothing`, prevKv: true }),
        op.put(`${p}y`, "y"),
      )
      .else(op.get(`${p}x`))
      .commit();
    expect(ok.succeeded).toBe(true);
    if (!ok.succeeded) throw new Error("unreachable");
    const [put, get, del, put2] = ok.responses;
    expect(put.prevKv).toMatchObject({ key: `${p}x`, value: "old" });
    expect(put.header.revision).toBe(ok.header.revision);
    // A read inside a write txn sees the txn's earlier writes.
    expect(get.kvs.map((kv) => [kv.key, kv.value])).toEqual([[`${p}x`, "new"]]);
    expect(get.count).toBe(1);
    expect(del).toMatchObject({ deleted: 0, prevKvs: [] });
    expect(put2.header.revision).toBe(ok.header.revision);
    // Every write of one txn has the same revision.
    const after = await etcd.range({ prefix: p });
    expect(after.kvs.map((kv) => kv.modRevision)).toEqual([ok.header.revision, ok.header.revision]);

    const failed = await etcd
      .txn()
      .if(cmp.value(`${p}x`, "==", "old"))
      .then(op.put(`${p}x`, "newer"))
      .else(op.get(`${p}x`), op.get(`${p}y`))
      .commit();
    expect(failed.succeeded).toBe(false);
    if (failed.succeeded) throw new Error("unreachable");
    expect(failed.responses.map((r) => r.kvs[0]?.value)).toEqual(["new", "y"]);
    expect((await etcd.get(`${p}x`))?.value).toBe("new");
  });

  it(
    "every op type in one then-branch: typed responses, " + "later ops see earlier ones, one revision for all writes",
    async () => {
      const p = fresh();
      await etcd.put(`${p}read`, "r");
      await etcd.put(`${p}old`, "o");
      const before = (await etcd.put(`${p}del/1`, "d1")).header.revision;
      await etcd.put(`${p}del/2`, "d2");
      const result = await etcd
        .txn()
        .if(cmp.version(`${p}new`, "==", 0))
        .then(
          op.get(`${p}read`),
          op.put(`${p}old`, "o2", { prevKv: true }),
          op.put(`${p}new`, "n"),
          op.delete({ prefix: `${p}del/`, prevKv: true }),
          op.get({ prefix: p, countOnly: true }),
          // `as const`: op.txn infers plain arrays as arrays, not tuples, so the nested responses would be untyped.
          op.txn(
            [cmp.version(`${p}new`, "==", 0)],
            [op.get(`${p}new`), op.put(`${p}nested`, "x")] as const,
            [op.get(`${p}read`)] as const,
          ),
        )
        .else(op.get(`${p}new`))
        .commit();
      expect(result.succeeded).toBe(true);
      if (!result.succeeded) throw new Error("unreachable");
      const [read, putOld, putNew, deleted, counted, nested] = result.responses;
      const rev = result.header.revision;
      expect(rev).toBeGreaterThan(before);
      expect(read.kvs.map((kv) => [kv.key, kv.value])).toEqual([[`${p}read`, "r"]]);
      expect(read).toMatchObject({ count: 1, more: false });
      expect(putOld.prevKv).toMatchObject({ key: `${p}old`, value: "o", version: 1 });
      expect(putNew.prevKv).toBeUndefined();
      expect(putNew.header.revision).toBe(rev);
      expect(deleted.deleted).toBe(2);
      expect(deleted.prevKvs.map((kv) => kv.value)).toEqual(["d1", "d2"]);
      // Ops see the earlier ops of the same txn: read, old, new (del/ gone, nested not yet written) = 3 keys.
      expect(counted).toMatchObject({ kvs: [], count: 3 });
      // The nested compare saw the store before the outer txn (`new` missing); its get sees the outer put.
      expect(nested.succeeded).toBe(true);
      if (!nested.succeeded) throw new Error("unreachable");
      const [nestedGet, nestedPut] = nested.responses;
      expect(nestedGet.kvs[0]).toMatchObject({ key: `${p}new`, value: "n", createRevision: rev, modRevision: rev });
      expect(nestedPut.prevKv).toBeUndefined();
      const after = await etcd.range({ prefix: p });
      expect(after.kvs.map((kv) => [kv.key.slice(p.length), kv.value])).toEqual([
        ["nested", "x"],
        ["new", "n"],
        ["old", "o2"],
        ["read", "r"],
      ]);
      for (const kv of after.kvs.filter((kv) => kv.key !== `${p}read`)) expect(kv.modRevision).toBe(rev);
    },
  );

  it(
    "else-branch: only the else ops run (writes included), typed; " +
      "a failed txn without else writes and returns nothing",
    async () => {
      const p = fresh();
      await etcd.put(`${p}k`, "current");
      const result = await etcd
        .txn()
        .if(cmp.value(`${p}k`, "==", "expected"))
        .then(op.put(`${p}k`, "overwritten"), op.put(`${p}then-marker`, "x"))
        .else(op.get(`${p}k`), op.put(`${p}else-marker`, "y", { prevKv: true }), op.delete(`${p}nothing`))
        .commit();
      expect(result.succeeded).toBe(false);
      if (result.succeeded) throw new Error("unreachable");
      const [got, put, deleted] = result.responses;
      expect(result.responses).toHaveLength(3);
      expect(got.kvs[0]).toMatchObject({ key: `${p}k`, value: "current" });
      expect(put.prevKv).toBeUndefined();
      expect(put.header.revision).toBe(result.header.revision);
      expect(deleted).toMatchObject({ deleted: 0, prevKvs: [] });
      expect(await etcd.get(`${p}k`)).toMatchObject({ value: "current" });
      expect(await etcd.get(`${p}then-marker`)).toBeUndefined();
      expect(await etcd.get(`${p}else-marker`)).toMatchObject({ value: "y" });

      const bare = await etcd
        .txn()
        .if(cmp.version(`${p}none`, ">", 0))
        .then(op.put(`${p}none`, "v"))
        .commit();
      expect(bare).toMatchObject({ succeeded: false, responses: [] });
      expect(await etcd.get(`${p}none`)).toBeUndefined();
    },
  );

  it(
    "a read-only txn does not advance the revision; " +
      "a write txn advances it by one; a txn that changes nothing does not",
    async () => {
      const p = fresh();
      const before = (await etcd.put(`${p}a`, "1")).header.revision;
      const read = await etcd
        .txn()
        .then(op.get(`${p}a`))
        .commit();
      expect(read.header.revision).toBeGreaterThanOrEqual(before);
      const write = await etcd
        .txn()
        .then(op.put(`${p}b`, "2"), op.put(`${p}c`, "3"), op.delete(`${p}a`))
        .commit();
      expect(write.header.revision).toBeGreaterThan(before);
      expect((await etcd.get(`${p}b`))?.modRevision).toBe(write.header.revision);
      expect((await etcd.get(`${p}c`))?.modRevision).toBe(write.header.revision);
      // Only a delete of nothing: no new revision.
      const noop = await etcd
        .txn()
        .then(op.delete(`${p}nothing`))
        .commit();
      expect(noop.header.revision).toBeGreaterThanOrEqual(write.header.revision);
      if (backend.name === "mock") {
        expect(read.header.revision).toBe(before);
        expect(write.header.revision).toBe(before + 1);
        expect(noop.header.revision).toBe(write.header.revision);
      }
    },
  );

  it("nested txn: its compare sees the state before the outer txn; typed nested responses", async () => {
    const p = fresh();
    await etcd.put(`${p}flag`, "on");
    const result = await etcd
      .txn()
      .if(cmp.version(`${p}flag`, ">", 0))
      .then(
        op.put(`${p}flag`, "off"),
        // Sees "on": compares of nested txns are evaluated against the state before the txn.
        op.txn(
          [cmp.value(`${p}flag`, "==", "on")],
          [op.put(`${p}inner`, "then"), op.get(`${p}flag`)],
          [op.put(`${p}inner`, "else")],
        ),
        op.txn(
          [cmp.value(`${p}flag`, "==", "nope")],
          [op.put(`${p}other`, "then")],
          [op.get(`${p}flag`), op.put(`${p}other`, "else")],
        ),
      )
      .commit();
    expect(result.succeeded).toBe(true);
    if (!result.succeeded) throw new Error("unreachable");
    const [, inner, other] = result.responses;
    expect(inner.succeeded).toBe(true);
    if (!inner.succeeded || other.succeeded) throw new Error("wrong branches");
    // The nested read sees the outer txn's earlier put. (op.txn's array arguments infer as arrays, not tuples,
    // so nested responses are a union per position: see report.)
    expect((inner.responses[1] as RangeResult).kvs[0]?.value).toBe("off");
    expect((other.responses[0] as RangeResult).kvs[0]?.value).toBe("off");
    expect((await etcd.range({ prefix: p })).kvs.map((kv) => [kv.key.slice(p.length), kv.value])).toEqual([
      ["flag", "off"],
      ["inner", "then"],
      ["other", "else"],
    ]);
  });
});

describe("fencing", () => {
  it("a createRevision compare lets only the current incarnation of a key write", async () => {
    const p = fresh();
    const lockKey = `${p}lock`;
    const guarded = `${p}data`;
    // Holder A creates the key; its create revision is its fencing token.
    const acquireA = await etcd
      .txn()
      .if(cmp.createRevision(lockKey, "==", 0))
      .then(op.put(lockKey, "A"))
      .commit();
    expect(acquireA.succeeded).toBe(true);
    const tokenA = acquireA.header.revision;
    expect(
      (
        await etcd
          .txn()
          .if(cmp.createRevision(lockKey, "==", tokenA))
          .then(op.put(guarded, "by A"))
          .commit()
      ).succeeded,
    ).toBe(true);
    // The key is lost (deleted) and B takes it: the same key, a new create revision.
    await etcd.delete(lockKey);
    const acquireB = await etcd
      .txn()
      .if(cmp.createRevision(lockKey, "==", 0))
      .then(op.put(lockKey, "B"))
      .commit();
    const tokenB = acquireB.header.revision;
    expect(tokenB).toBeGreaterThan(tokenA);
    // Anyone else's acquire fails and reports the holder.
    const contender = await etcd
      .txn()
      .if(cmp.createRevision(lockKey, "==", 0))
      .then(op.put(lockKey, "C"))
      .else(op.get(lockKey))
      .commit();
    if (contender.succeeded) throw new Error("a second holder got the key");
    expect(contender.responses[0].kvs[0]).toMatchObject({ value: "B", createRevision: tokenB });
    // A's stale write is fenced off; B's goes through.
    expect(
      (
        await etcd
          .txn()
          .if(cmp.createRevision(lockKey, "==", tokenA))
          .then(op.put(guarded, "stale A"))
          .commit()
      ).succeeded,
    ).toBe(false);
    expect(
      (
        await etcd
          .txn()
          .if(cmp.createRevision(lockKey, "==", tokenB))
          .then(op.put(guarded, "by B"))
          .commit()
      ).succeeded,
    ).toBe(true);
    expect(await etcd.get(guarded)).toMatchObject({ value: "by B", version: 2 });
  });
});

describe("errors", () => {
  it("more than 128 operations → INVALID_ARGUMENT 'too many operations'; nothing applied; 128 is allowed", async () => {
    const p = fresh();
    const ops = Array.from({ length: 129 }, (_, i) => op.put(`${p}${String(i).padStart(3, "0")}`, "v"));
    const error = await rejection(
      etcd
        .txn()
        .then(...ops)
        .commit(),
    );
    expect(error).toMatchObject({ code: "INVALID_ARGUMENT", grpcCode: 3 });
    expect(error.message).toContain("too many operations in txn request");
    expect((await etcd.range({ prefix: p, countOnly: true })).count).toBe(0);
    expect(
      (
        await etcd
          .txn()
          .then(...ops.slice(0, 128))
          .commit()
      ).succeeded,
    ).toBe(true);
    expect((await etcd.range({ prefix: p, countOnly: true })).count).toBe(128);
  });

  it("the same key written twice in one branch → INVALID_ARGUMENT 'duplicate key'; nothing applied", async () => {
    const p = fresh();
    const duplicates = [
      () =>
        etcd
          .txn()
          .then(op.put(`${p}k`, "1"), op.put(`${p}k`, "2"))
          .commit(),
      () =>
        etcd
          .txn()
          .then(op.put(`${p}k`, "1"), op.delete(`${p}k`))
          .commit(),
      () =>
        etcd
          .txn()
          .then(op.delete({ prefix: p }), op.put(`${p}k`, "2"))
          .commit(),
      () =>
        etcd
          .txn()
          .then(op.put(`${p}k`, "1"), op.txn([], [op.put(`${p}k`, "2")]))
          .commit(),
      () =>
        etcd
          .txn()
          .if(cmp.version(`${p}k`, "==", 0))
          .else(op.put(`${p}k`, "1"), op.put(`${p}k`, "2"))
          .commit(),
    ];
    for (const attempt of duplicates) {
      const error = await rejection(attempt());
      expect(error).toMatchObject({ code: "INVALID_ARGUMENT", grpcCode: 3, httpStatus: 400 });
      expect(error.message).toContain("duplicate key given in txn request");
    }
    expect((await etcd.range({ prefix: p })).count).toBe(0);
  });

  it(
    "the same key in then and else is fine; two deletes of one key are fine; " +
      "the same key in two nested branches is fine",
    async () => {
      const p = fresh();
      const a = await etcd
        .txn()
        .if(cmp.version(`${p}k`, "==", 0))
        .then(op.put(`${p}k`, "then"))
        .else(op.put(`${p}k`, "else"))
        .commit();
      expect(a.succeeded).toBe(true);
      await etcd
        .txn()
        .then(op.delete(`${p}k`), op.delete({ prefix: p }))
        .commit();
      await etcd
        .txn()
        .then(op.txn([cmp.version(`${p}k`, "==", 0)], [op.put(`${p}k`, "a")], [op.put(`${p}k`, "b")]))
        .commit();
      expect((await etcd.get(`${p}k`))?.value).toBe("a");
    },
  );

  it(
    "a put with an unknown lease on the taken branch → LEASE_NOT_FOUND; " + "on the branch not taken it is ignored",
    async () => {
      const p = fresh();
      const lease = await etcd.lease.grant(60);
      await etcd.lease.revoke(lease.id);
      await expect(
        etcd
          .txn()
          .then(op.put(`${p}k`, "v", { lease: lease.id }))
          .commit(),
      ).rejects.toMatchObject({ code: "LEASE_NOT_FOUND" });
      const skipped = await etcd
        .txn()
        .if(cmp.version(`${p}k`, "==", 0))
        .then(op.put(`${p}k`, "v"))
        .else(op.put(`${p}k`, "v", { lease: lease.id }))
        .commit();
      expect(skipped.succeeded).toBe(true);
      // ignoreValue on a missing key inside a txn: INVALID_ARGUMENT 'key not found', and the
      // txn's other put is not applied.
      await expect(
        etcd
          .txn()
          .then(op.put(`${p}other`, "x"), op.put(`${p}missing`, undefined, { ignoreValue: true }))
          .commit(),
      ).rejects.toMatchObject({
        code: "INVALID_ARGUMENT",
        message: expect.stringContaining("key not found"),
      });
      expect(await etcd.get(`${p}other`)).toBeUndefined();
    },
  );

  it("a read at a future revision inside a txn → FUTURE_REVISION", async () => {
    const { header } = await etcd.range({ key: "x" });
    await expect(
      etcd
        .txn()
        .then(op.get({ key: "x", revision: header.revision + 1_000_000 }))
        .commit(),
    ).rejects.toMatchObject({
      code: "FUTURE_REVISION",
    });
  });
});
