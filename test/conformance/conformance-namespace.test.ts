// The `namespace` option on the mock and on real etcd: every key sent is prefixed, every key received is
// stripped, and no call reaches outside the namespace (KV, ranges to "\0", 0xff prefixes, txn, watch, leases).
import { describe, expect, it } from "vitest";
import { cmp, type Etcd, type KeyValue, op, type WatchBatch } from "../../src/index.js";
import { bytes, eventCount, events, freshNames, pull, useWatches } from "../support/etcd.js";
import { useBackend } from "./backend.js";

const { backend } = useBackend();

const freshNamespace = freshNames("ns", "/");

/**
 * A client scoped to a fresh namespace, a plain client (the backend's own namespace) to look from outside, and
 * the key just past the namespace (its prefix's range end), which must never be seen from inside.
 */
function scopedPair(): { ns: string; scoped: Etcd; plain: Etcd; sibling: string } {
  const ns = freshNamespace();
  return {
    ns,
    scoped: backend.client({ namespace: `${backend.namespace}${ns}` }),
    plain: backend.client(),
    sibling: `${ns.slice(0, -1)}0`,
  };
}

const keysOf = (kvs: KeyValue[]) => kvs.map((kv) => kv.key);

const watchOn = useWatches();

describe("kv", () => {
  it("prefixes keys on the way out and strips them on the way back (put, get, prevKv, range, delete)", async () => {
    const { ns, scoped, plain, sibling } = scopedPair();
    const put = await scoped.put("a", "1", { prevKv: true });
    expect(put.prevKv).toBeUndefined();
    expect(await plain.get(`${ns}a`)).toMatchObject({ key: `${ns}a`, value: "1" });
    expect(await plain.get("a")).toBeUndefined();
    const mine = await scoped.get("a");
    expect(mine).toMatchObject({ key: "a", value: "1" });
    expect(mine?.keyBytes).toEqual(new TextEncoder().encode("a"));

    await plain.put(`${ns}b`, "2");
    await plain.put(sibling, "outside");
    const all = await scoped.range({ prefix: "" });
    expect(keysOf(all.kvs)).toEqual(["a", "b"]);
    expect(all.count).toBe(2);
    expect((await scoped.put("b", "3", { prevKv: true })).prevKv).toMatchObject({ key: "b", value: "2" });

    const deleted = await scoped.delete({ prefix: "", prevKv: true });
    expect(deleted.deleted).toBe(2);
    expect(keysOf(deleted.prevKvs)).toEqual(["a", "b"]);
    expect(await plain.get(sibling)).toMatchObject({ value: "outside" });
    expect((await plain.range({ prefix: ns })).count).toBe(0);
  });

  it('end "\\0" (every key from here) stops at the namespace\'s end', async () => {
    const { ns, scoped, plain, sibling } = scopedPair();
    for (const k of ["a", "b", "c"]) await plain.put(`${ns}${k}`, k);
    await plain.put(sibling, "outside");
    expect(keysOf((await scoped.range({ key: "b", end: "\0" })).kvs)).toEqual(["b", "c"]);
  });

  it("a 0xff prefix stays inside the namespace", async () => {
    const { scoped, plain, sibling } = scopedPair();
    await scoped.put(bytes(0xff, 0xff, 0x01), "in");
    await scoped.put(bytes(0xff, 0xfe), "below");
    await plain.put(sibling, "after the namespace");
    const result = await scoped.range({ prefix: bytes(0xff, 0xff) });
    expect(result.kvs.map((kv) => [...kv.keyBytes])).toEqual([[0xff, 0xff, 0x01]]);
  });
});

describe("txn, watch, lease", () => {
  it("a txn's compares, ops and responses are in the namespace", async () => {
    const { ns, scoped, plain } = scopedPair();
    const result = await scoped
      .txn()
      .if(cmp.version("k", "==", 0))
      .then(op.put("k", "v"), op.get({ prefix: "" }))
      .commit();
    expect(result.succeeded).toBe(true);
    if (!result.succeeded) throw new Error("unreachable");
    expect(result.responses[1].kvs.map((kv) => kv.key)).toEqual(["k"]);
    expect(await plain.get(`${ns}k`)).toMatchObject({ value: "v" });
    expect(
      await scoped
        .txn()
        .if(cmp.value("k", "==", "v"))
        .commit(),
    ).toMatchObject({ succeeded: true });
  });

  it("a watch sees its keys without the namespace, and nothing outside it", async () => {
    const { ns, scoped, plain, sibling } = scopedPair();
    const { header } = await plain.range({ prefix: ns, countOnly: true });
    const watch = watchOn(scoped, { prefix: "", startRevision: header.revision + 1 });
    await plain.put(sibling, "outside");
    await scoped.put("a", "1");
    await plain.put(`${ns}b`, "2");
    const batches: WatchBatch[] = await pull(watch, eventCount(2), 5_000);
    expect(events(batches).map((e) => [e.kv.key, e.kv.value])).toEqual([
      ["a", "1"],
      ["b", "2"],
    ]);
  });

  it("a lease's keys (timeToLive) come back without the namespace", async () => {
    const { ns, scoped, plain } = scopedPair();
    const lease = await scoped.lease.grant(30);
    try {
      await scoped.put("k", "v", { lease: lease.id });
      expect((await scoped.lease.timeToLive(lease.id, { keys: true })).keys).toEqual(["k"]);
      expect((await plain.lease.timeToLive(lease.id, { keys: true })).keys).toEqual([`${ns}k`]);
    } finally {
      await plain.lease.revoke(lease.id).catch(() => {});
    }
  });
});
