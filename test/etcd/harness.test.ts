/// <reference path="./provided.d.ts" />
// Tests of the test harness itself, over the gateway with plain fetch (no SDK code involved): members,
// clusters, restarts, auth and the TCP relay, all of the project's etcd version.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Etcd3 } from "etcd3";
import { Pool } from "undici";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { eventually, sharedEndpoint } from "../support/etcd.js";
import { freePorts, releasePorts } from "../support/ports.js";
import { send } from "../support/raw-gateway.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
import { b64, unb64 } from "../support/wire.js";
import { addUser, enableAuth, etcdVersion, makeLeader, startCluster, startEtcd, type EtcdCluster } from "./harness.js";

const SUPPORT = join(dirname(fileURLToPath(import.meta.url)), "../support");

/** One POST to a member (any status), its answer parsed. */
async function request(
  endpoint: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const { status, text } = await send(endpoint, path, body, { headers, timeoutMs: 5_000 });
  return { status, body: JSON.parse(text) as Record<string, unknown> };
}

const put = (endpoint: string, key: string, value: string, headers?: Record<string, string>) =>
  request(endpoint, "/v3/kv/put", { key: b64(key), value: b64(value) }, headers);

async function get(endpoint: string, key: string): Promise<string | undefined> {
  const { status, body } = await request(endpoint, "/v3/kv/range", { key: b64(key) });
  if (status !== 200) throw new Error(`range ${key}: HTTP ${status} ${JSON.stringify(body)}`);
  const kvs = (body.kvs ?? []) as Array<{ value?: string }>;
  return kvs[0] === undefined ? undefined : unb64(kvs[0].value ?? "");
}

async function putOk(endpoint: string, key: string, value: string): Promise<void> {
  const { status, body } = await put(endpoint, key, value);
  if (status !== 200) throw new Error(`put ${key}: HTTP ${status} ${JSON.stringify(body)}`);
}

/** What the member says it is (GET /version): the harness must start the project's version, never another. */
async function serverRelease(endpoint: string): Promise<string> {
  const res = await fetch(`${endpoint}/version`, { signal: AbortSignal.timeout(5_000) });
  return ((await res.json()) as { etcdserver: string }).etcdserver;
}

const unique = (label: string) => `harness-test/${label}/${Date.now()}-${Math.random().toString(36).slice(2)}`;

describe("global member", () => {
  it("is provided by global-setup, is the project's etcd version, and serves put and range", async () => {
    const endpoint = sharedEndpoint();
    expect(inject("etcdEndpoints")).toContain(endpoint);
    expect(endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(inject("etcdRelease").startsWith(`${inject("etcdVersion")}.`)).toBe(true);
    // Extra members (harness.ts) read the version from the environment vitest.config.ts sets per project.
    expect(etcdVersion()).toBe(inject("etcdVersion"));
    expect(await serverRelease(endpoint)).toBe(inject("etcdRelease"));
    const key = unique("global");
    await putOk(endpoint, key, "hello");
    expect(await get(endpoint, key)).toBe("hello");
  });
});

describe("single member", () => {
  it("keeps its data across kill() and restart()", async () => {
    const member = await startEtcd();
    try {
      expect(await serverRelease(member.clientUrl)).toBe(inject("etcdRelease"));
      const key = unique("restart");
      await putOk(member.clientUrl, key, "survives");
      const firstPid = member.pid;
      await member.kill();
      await member.restart();
      expect(member.pid).not.toBe(firstPid);
      expect(await get(member.clientUrl, key)).toBe("survives");
      expect((await member.etcdctl("get", key, "--print-value-only")).trim()).toBe("survives");
    } finally {
      await member.stop();
    }
  });
});

describe("ports", () => {
  const claimOf = (port: number) => join(tmpdir(), "etcd-edge-ports", String(port));
  const ephemeralLow = () =>
    Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);

  it("of a member lie below the kernel's ephemeral range, claimed by this process until it stops", async () => {
    const member = await startEtcd();
    const ports = [member.clientUrl, member.peerUrl].map((u) => Number(new URL(u).port));
    try {
      for (const port of ports) {
        // No outgoing connection of any process takes a port below that range: a restart finds its ports free.
        expect(port).toBeLessThan(ephemeralLow());
        expect(readFileSync(claimOf(port), "utf8")).toBe(String(process.pid));
      }
      await member.kill();
      await member.restart();
      for (const port of ports) expect(existsSync(claimOf(port))).toBe(true);
    } finally {
      await member.stop();
    }
    for (const port of ports) expect(existsSync(claimOf(port))).toBe(false);
  });

  it("claimed by another live process are never drawn", async () => {
    // A second test process draws 400 ports and keeps its claims while it lives; 400 more drawn here would share
    // about 7 with them if draws were not claimed.
    const script = `import { freePorts } from ${JSON.stringify(pathToFileURL(join(SUPPORT, "ports.ts")).href)};
      console.log(JSON.stringify(await freePorts(400))); setInterval(() => {}, 1_000);`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      const theirs: number[] = await new Promise((resolve, reject) => {
        child.stdout.once("data", (chunk: Buffer) => resolve(JSON.parse(chunk.toString()) as number[]));
        child.once("exit", (code) => reject(new Error(`the drawing process exited (${code}) before it drew`)));
      });
      expect(new Set(theirs).size).toBe(400);
      for (const port of theirs.slice(0, 10)) expect(readFileSync(claimOf(port), "utf8")).toBe(String(child.pid));
      const ours = await freePorts(400);
      try {
        expect(ours.filter((port) => theirs.includes(port))).toEqual([]);
      } finally {
        releasePorts(ours);
      }
    } finally {
      child.kill("SIGKILL");
    }
  });
});

describe("3-member cluster", () => {
  let cluster: EtcdCluster;
  beforeAll(async () => {
    cluster = await startCluster(3);
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it("replicates a put on one member to the others", async () => {
    const [a, , c] = cluster.members;
    for (const endpoint of cluster.endpoints) expect(await serverRelease(endpoint)).toBe(inject("etcdRelease"));
    const key = unique("replicate");
    await putOk(a!.clientUrl, key, "v1");
    expect(await get(c!.clientUrl, key)).toBe("v1");
    expect(cluster.endpoints).toHaveLength(3);
  });

  it("keeps serving reads and writes after one member stops", async () => {
    const [first, second, third] = cluster.members;
    const before = unique("before-stop");
    await putOk(first!.clientUrl, before, "old");
    // Make the member we stop the leader, so the survivors must really elect a new one.
    await makeLeader(cluster, 0);
    await first!.stop();

    // If the stopped member led, the survivors need an election: bounded retry.
    const after = unique("after-stop");
    await eventually("write on a survivor", 10_000, () => putOk(second!.clientUrl, after, "new"));
    expect(await get(third!.clientUrl, after)).toBe("new");
    expect(await get(second!.clientUrl, before)).toBe("old");
  });

  it("brings a killed member back with restart()", async () => {
    const [, second, third] = cluster.members;
    // With the first member already stopped, this leaves no quorum until restart() brings it back.
    await second!.kill();
    await second!.restart();
    const key = unique("after-restart");
    await eventually("write after restart", 10_000, () => putOk(second!.clientUrl, key, "back"));
    expect(await get(third!.clientUrl, key)).toBe("back");
  });
});

describe("tcp proxy", () => {
  it("forwards requests, and cutAll() fails an in-flight watch stream instead of hanging", async () => {
    const proxy = await startTcpProxy(sharedEndpoint());
    try {
      const key = unique("proxy");
      await putOk(proxy.url, key, "through");
      expect(await get(proxy.url, key)).toBe("through");

      const watch = await fetch(`${proxy.url}/v3/watch`, {
        method: "POST",
        body: JSON.stringify({ create_request: { key: b64(key) } }),
        signal: AbortSignal.timeout(15_000),
      });
      expect(watch.status).toBe(200);
      const reader = watch.body!.getReader();
      const created = new TextDecoder().decode((await reader.read()).value);
      expect(created).toContain('"created":true');
      expect(proxy.connections()).toBeGreaterThanOrEqual(1);

      const cutAt = Date.now();
      proxy.cutAll();
      const outcome = await reader.read().then(
        () => "resolved",
        (err: unknown) => (err instanceof Error && err.name === "TimeoutError" ? "timed out" : "failed"),
      );
      expect(outcome).toBe("failed");
      expect(Date.now() - cutAt).toBeLessThan(5_000);
      expect(proxy.connections()).toBe(0);
    } finally {
      await proxy.close();
    }
  });

  it("cutAfterAnswerMs: each watch stream gets etcd's first answer, then fails that long after", async () => {
    const cutAfterAnswerMs = 200;
    const proxy = await startTcpProxy(sharedEndpoint(), { cutAfterAnswerMs });
    try {
      for (const round of [1, 2]) {
        const watch = await fetch(`${proxy.url}/v3/watch`, {
          method: "POST",
          body: JSON.stringify({ create_request: { key: b64(unique(`cut-${round}`)) } }),
          signal: AbortSignal.timeout(15_000),
        });
        const reader = watch.body!.getReader();
        expect(new TextDecoder().decode((await reader.read()).value)).toContain('"created":true');
        const createdAt = performance.now();
        const outcome = await reader.read().then(
          () => "resolved",
          (err: unknown) => (err instanceof Error && err.name === "TimeoutError" ? "timed out" : "failed"),
        );
        expect(outcome).toBe("failed");
        // After the answer (it arrived whole), and within the bound a reset takes, counted from that answer. No
        // lower bound: the relay's timer starts when the answer reaches it, a little before this test reads it.
        expect(performance.now() - createdAt).toBeLessThan(cutAfterAnswerMs + 5_000);
        expect(proxy.connections()).toBe(0);
      }
    } finally {
      await proxy.close();
    }
  });

  it("oneWayMs delays each way, and a new connection's first bytes a round trip more, in order; gRPC too", async () => {
    const oneWayMs = 150;
    const proxy = await startTcpProxy(sharedEndpoint(), { oneWayMs });
    // One connection, so the first request pays the handshake and the second does not.
    const pool = new Pool(proxy.url, { connections: 1 });
    const client = new Etcd3({ hosts: proxy.url });
    try {
      const timed = async (path: string, body: unknown) => {
        const started = performance.now();
        const answer = await pool.request({ path, method: "POST", body: JSON.stringify(body) });
        const json = (await answer.body.json()) as Record<string, unknown>;
        return { ms: performance.now() - started, answer: json };
      };
      const key = unique("delayed");
      // Larger than a socket's chunk, so it crosses as many chunks, which must arrive in order.
      const value = "0123456789abcdef".repeat(8 * 1024);
      const first = await timed("/v3/kv/put", { key: b64(key), value: b64(value) });
      expect(first.answer.header).toBeDefined();
      expect(first.ms).toBeGreaterThanOrEqual(4 * oneWayMs);
      const second = await timed("/v3/kv/range", { key: b64(key) });
      expect(second.ms).toBeGreaterThanOrEqual(2 * oneWayMs);
      expect(unb64((second.answer.kvs as Array<{ value: string }>)[0]!.value)).toBe(value);

      // etcd3 speaks gRPC (HTTP/2) on the same port: it goes through the same relay.
      await client.put(`${key}/grpc`).value("over grpc");
      expect(await get(sharedEndpoint(), `${key}/grpc`)).toBe("over grpc");
    } finally {
      client.close();
      await pool.close();
      await proxy.close();
    }
  });
});

describe("auth", () => {
  it("enableAuth + addUser: anonymous puts are refused, the user's token writes under its prefix", async () => {
    const member = await startEtcd();
    try {
      const rootPassword = "root-pw";
      await enableAuth(member, { rootPassword });
      await addUser(member, { rootPassword, user: "app", password: "app-pw", prefix: "app/" });
      await addUser(member, { rootPassword, user: "reader", password: "reader-pw", prefix: "app/", readOnly: true });

      expect((await put(member.clientUrl, "app/anon", "x")).status).not.toBe(200);

      const token = async (name: string, password: string) => {
        const { status, body } = await request(member.clientUrl, "/v3/auth/authenticate", { name, password });
        expect(status).toBe(200);
        expect(typeof body.token).toBe("string");
        return { authorization: body.token as string };
      };
      const app = await token("app", "app-pw");
      expect((await put(member.clientUrl, "app/lock", "held", app)).status).toBe(200);
      expect((await put(member.clientUrl, "other/key", "x", app)).status).toBe(403);

      const reader = await token("reader", "reader-pw");
      expect((await put(member.clientUrl, "app/lock", "x", reader)).status).toBe(403);

      const value = await member.etcdctl(`--user=root:${rootPassword}`, "get", "app/lock", "--print-value-only");
      expect(value.trim()).toBe("held");
    } finally {
      await member.stop();
    }
  });
});
