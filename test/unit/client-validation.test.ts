// Bad arguments are INVALID_ARGUMENT before any request: a fetch that fails the test if the SDK ever calls it
// proves the check happens on the client.
import { describe, expect, it } from "vitest";
import { Etcd, EtcdError, type Fetch } from "../../src/index.js";

/** A fetch that counts its calls and refuses every one. */
function forbiddenFetch(): Fetch & { calls: number } {
  const spy = Object.assign(
    async (input: string): Promise<never> => {
      spy.calls++;
      throw new Error(`fetch must not be called, but was called for ${input}`);
    },
    { calls: 0 },
  );
  return spy;
}

const fetch = forbiddenFetch();
const etcd = new Etcd({ endpoints: "http://127.0.0.1:9", fetch });

describe("INVALID_ARGUMENT before any request", () => {
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

  it("a txn builder used out of order (if after then, if twice, then after else) throws at once", () => {
    expect(() => etcd.txn().then().if()).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT" }));
    expect(() => etcd.txn().if().if()).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT" }));
    expect(() => etcd.txn().else().then()).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT" }));
    expect(fetch.calls).toBe(0);
  });
});
