// Messages that finish the sentence, each with its exact text against a real member: https:// to etcd's
// plain-HTTP port, no `auth` on an auth-enabled cluster, PERMISSION_DENIED naming the key or lock and the grant
// the README's RBAC table gives for it, and a TIMEOUT naming the operation and its budget.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EtcdError, isEtcdError } from "../../src/index.js";
import { createNodeFetch } from "../../src/node/index.js";
import { client, sharedEndpoint, uniqueName } from "../support/etcd.js";
import { silentServer } from "../support/loopback.js";
import { addUser, enableAuth, type EtcdMember, startEtcd } from "./harness.js";

async function failure(pending: Promise<unknown>): Promise<EtcdError> {
  try {
    await pending;
  } catch (error) {
    if (isEtcdError(error)) return error;
    throw error;
  }
  throw new Error("expected a failure");
}

const RBAC = `(etcdctl role grant-permission; etcd-edge's README, "RBAC: what a lock user needs")`;
/** What etcd's RBAC answers, as the message quotes it. */
const REFUSED = "was refused by etcd's RBAC (etcdserver: permission denied): this user's roles need";

describe("https:// to etcd's plain-HTTP port", () => {
  it.each([
    ["the global fetch", undefined],
    ["etcd-edge/node", createNodeFetch()],
  ])("with %s: says the endpoint may not speak TLS, and what to do", async (_, fetch) => {
    const endpoint = sharedEndpoint().replace("http://", "https://");
    const plain =
      `cannot reach ${endpoint}: the server hung up before any TLS handshake: the endpoint may not speak TLS ` +
      "(ECONNRESET): is this etcd's plain-HTTP port? Use http://, or serve TLS with etcd's --cert-file and " +
      "--key-file (etcd-edge's docs/tls.md)";
    // undici words the same hang-up as a plain reset about one time in twelve ("read ECONNRESET": the peer's RST
    // read mid-handshake), which tells nothing of the phase: then it is a reset, and the request may have gone.
    const reset =
      `cannot reach ${endpoint}: the connection was reset (ECONNRESET); so does a missing client certificate: ` +
      "etcd demands one with --client-cert-auth and whenever --trusted-ca-file is set, signed by that CA, with " +
      "the clientAuth extended key usage (etcd-edge's docs/tls.md)";
    const options = { endpoints: endpoint, fetch, timeout: 3_000, retries: 0 };
    const error = await failure(client(options).get("k"));
    expect(error.code).toBe("UNAVAILABLE");
    expect([plain, reset]).toContain(error.message);
    // Refused before a byte of the request went: a write there was not applied, and says so (issue 40).
    const write = await failure(client(options).put("k", "v"));
    expect(write.code).toBe("UNAVAILABLE");
    expect(write.indeterminate).toBe(write.message !== plain);
  });
});

describe("auth and RBAC", () => {
  const rootPassword = "root-pw-5e1a";
  const password = "jobs-pw-81c2";
  let member: EtcdMember;

  beforeAll(async () => {
    member = await startEtcd();
    await enableAuth(member, { rootPassword });
    await addUser(member, { rootPassword, user: "jobs", password, prefix: "jobs/" });
  });
  afterAll(async () => {
    await member?.stop();
  });

  it("no auth option on an auth-enabled cluster: says to pass it", async () => {
    const error = await failure(client({ endpoints: member.clientUrl }).get("jobs/k"));
    expect(error.code).toBe("UNAUTHENTICATED");
    expect(error.message).toBe(
      "etcdserver: user name is empty: the cluster has auth enabled and this client sent no token: " +
        "pass auth: { username, password } to new Etcd()",
    );
  });

  it("PERMISSION_DENIED names the key and the grant it needs", async () => {
    const etcd = client({ endpoints: member.clientUrl, auth: { username: "jobs", password } });
    const read = await failure(etcd.get("billing/k"));
    expect([read.code, read.message]).toEqual([
      "PERMISSION_DENIED",
      `reading key "billing/k" ${REFUSED} read on key ` + `"billing/k" ${RBAC}`,
    ]);
    expect((read.cause as EtcdError).message).toBe("etcdserver: permission denied");
    const write = await failure(etcd.put("billing/k", "v"));
    expect(write.message).toBe(
      `writing key "billing/k" ${REFUSED} write (or ` + `readwrite) on key "billing/k" ${RBAC}`,
    );
    const scan = await failure(etcd.range({ prefix: "billing/" }));
    expect(scan.message).toMatch(/^reading prefix "billing\/" was refused by .* need read on prefix "billing\/" /);
  });

  it("PERMISSION_DENIED names the lock and the grant the RBAC table gives for it", async () => {
    const etcd = client({ endpoints: member.clientUrl, auth: { username: "jobs", password } });
    const session = await etcd.session({ ttl: 20 });
    try {
      const lock = await failure(session.mutex("billing/nightly").lock());
      expect([lock.code, lock.message]).toEqual([
        "PERMISSION_DENIED",
        `lock billing/nightly ${REFUSED} readwrite on ` + `prefix "billing/nightly/" ${RBAC}`,
      ]);
      const both = await failure(session.lockAll(["billing/a", "billing/b"]));
      expect(both.message).toMatch(/need readwrite on prefix "billing\/a\/" and "billing\/b\/" /);
      // Within the grant, the same user locks.
      await (await session.mutex("jobs/nightly").lock()).unlock();
    } finally {
      await session.close();
    }
  });
});

describe("TIMEOUT names the operation and its budget", () => {
  it("a call: its path, and where its budget comes from", async () => {
    const server = await silentServer();
    try {
      const error = await failure(client({ endpoints: server.url, timeout: 200 }).get("k"));
      expect([error.code, error.message]).toEqual([
        "TIMEOUT",
        "the /v3/kv/range call timed out after 200 ms: that is its whole budget, retries included (the call's " +
          "`timeout` option, else the client's)",
      ]);
    } finally {
      await server.close();
    }
  });

  it("a tryLock: the lock it tried", async () => {
    const etcd = client();
    const session = await etcd.session({ ttl: 20 });
    const name = uniqueName("messages");
    try {
      // A budget too short for the join's round trip.
      const error = await failure(session.mutex(name).tryLock({ timeout: 0.001 }));
      expect([error.code, error.message]).toEqual(["TIMEOUT", `tryLock of lock ${name} timed out after 0.001 ms`]);
    } finally {
      await session.close();
    }
  });
});
