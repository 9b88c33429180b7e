// What a namespace isolates and what it does not, on the mock and on real etcd: a namespace must end with "/"
// (without it, "tenant-a" would also see "tenant-a0/…"); keys of a sibling tenant stay out of sight; leases
// are cluster-wide, so one tenant can list, look up, adopt and revoke another's lease (which deletes its keys).
import { describe, expect, it } from "vitest";
import type { Etcd } from "../../src/index.js";
import { rejection } from "../support/async.js";
import { useBackend } from "./backend.js";

const { backend } = useBackend();

let n = 0;
/** Two tenants whose namespaces differ by a trailing character: "tenant-N/" and "tenant-N0/". */
function tenants(): { a: Etcd; a0: Etcd; plain: Etcd; a0Namespace: string } {
  const base = `${backend.namespace}tenant-${++n}`;
  return {
    a: backend.client({ namespace: `${base}/` }),
    a0: backend.client({ namespace: `${base}0/` }),
    plain: backend.client(),
    a0Namespace: `tenant-${n}0/`,
  };
}

describe("a namespace without a trailing separator", () => {
  it('is refused before any request, with the fix (old: accepted, and "tenant-a" saw "tenant-a0/…")', async () => {
    let sent = 0;
    const fetch: typeof backend.fetch = (input, init) => {
      sent++;
      return backend.fetch(input, init);
    };
    const error = await rejection((async () => backend.client({ namespace: "tenant-a", fetch }))());
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toContain('"tenant-a0/"');
    expect(error.message).toContain('Write "tenant-a/"');
    const bytes = await rejection((async () => backend.client({ namespace: new TextEncoder().encode("t"), fetch }))());
    expect(bytes.code).toBe("INVALID_ARGUMENT");
    expect(sent).toBe(0);
    // No namespace at all, or one that ends with "/", is fine.
    expect(backend.client({ namespace: "", fetch }).config.namespace).toEqual(new Uint8Array(0));
    expect(backend.client({ namespace: "tenant-a/", fetch }).config.namespace).toEqual(
      new TextEncoder().encode("tenant-a/"),
    );
  });

  it("with it, a tenant sees none of the keys of a tenant whose namespace extends its name", async () => {
    const { a, a0, plain, a0Namespace } = tenants();
    await a0.put("k", "theirs");
    await a.put("k", "mine");
    expect((await a.range({ prefix: "" })).kvs.map((kv) => [kv.key, kv.value])).toEqual([["k", "mine"]]);
    expect((await a0.get("k"))?.value).toBe("theirs");
    expect((await plain.get(`${a0Namespace}k`))?.value).toBe("theirs");
  });
});

describe("leases are cluster-wide, whatever the namespace", () => {
  it("another tenant's lease is listed, looked up (not its keys), adopted and revoked, deleting its keys", async () => {
    const { a, a0 } = tenants();
    const theirs = await a0.lease.grant(60);
    await a0.put("held", "by a0", { lease: theirs.id });
    try {
      expect((await a.lease.list()).leases).toContain(theirs.id);
      const seen = await a.lease.timeToLive(theirs.id, { keys: true });
      expect(seen.grantedTtl).toBe(theirs.ttl);
      // Its key is outside this namespace: not shown, but the lease is.
      expect(seen.keys).toEqual([]);
      const adopted = await a.session({ leaseId: theirs.id, keepAlive: "manual" });
      expect(adopted.leaseId).toBe(theirs.id);
      await a.lease.revoke(theirs.id);
      await adopted.close().catch(() => {});
      expect(await a0.get("held")).toBeUndefined();
      expect((await rejection(a0.lease.keepAliveOnce(theirs.id))).code).toBe("LEASE_NOT_FOUND");
    } finally {
      await a0.lease.revoke(theirs.id).catch(() => {});
    }
  });
});
