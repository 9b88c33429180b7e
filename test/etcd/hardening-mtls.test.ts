// TLS against real etcd members (the run's version) with a private CA made here by openssl:
// mutual TLS (`--client-cert-auth`) through createNodeFetch({ ca, cert, key }),
// a private CA alone through createNodeFetch({ ca }), what is refused (no certificate, another CA's,
// an untrusted server), and etcd's refusal of a client certificate with a Common Name once auth is enabled.
// Members are started and stopped here by PID, on free loopback ports.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, openSync, closeSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Etcd, type EtcdError, type EtcdOptions, op } from "../../src/index.js";
import { createNodeFetch, type NodeFetch, type NodeFetchOptions } from "../../src/node/index.js";
import { rejection, sleep, within } from "../support/async.js";
import { client } from "../support/etcd.js";
import { freePort } from "../support/etcd-members.js";
import { killedWithParent } from "../support/processes.js";
import { etcdBinDir } from "./harness.js";

const run = (command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env) =>
  new Promise<string>((resolve, reject) => {
    execFile(command, args, { cwd, env, timeout: 30_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${command} ${args.join(" ")}: ${stderr || error.message}`));
      else resolve(stdout);
    });
  });

/** A private PKI: a CA, a server certificate for 127.0.0.1, client certificates with and without a CN. */
async function makePki(dir: string): Promise<void> {
  const openssl = (...args: string[]) => run("openssl", args, dir);
  const key = (name: string) =>
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", `${name}.key`);
  for (const ca of ["ca", "other-ca"]) {
    await key(ca);
    await openssl(
      "req",
      "-x509",
      "-new",
      "-key",
      `${ca}.key`,
      "-out",
      `${ca}.crt`,
      "-days",
      "1",
      "-subj",
      `/CN=etcd-edge test ${ca}`,
    );
  }
  const issue = async (name: string, subject: string, ca: string, extensions: string) => {
    await key(name);
    await openssl("req", "-new", "-key", `${name}.key`, "-out", `${name}.csr`, "-subj", subject);
    writeFileSync(join(dir, `${name}.ext`), extensions);
    await openssl(
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      `${ca}.crt`,
      "-CAkey",
      `${ca}.key`,
      "-CAcreateserial",
      "-out",
      `${name}.crt`,
      "-days",
      "1",
      "-extfile",
      `${name}.ext`,
    );
  };
  // clientAuth too: with --client-cert-auth the member's own gateway dials its gRPC server with this
  // certificate, and a serverAuth-only one makes every gateway call fail ("connection closed").
  await issue(
    "server",
    "/CN=etcd-server",
    "ca",
    "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
  );
  await issue("client-cn", "/CN=etcd-edge-client", "ca", "extendedKeyUsage=clientAuth\n");
  // Names only in subjectAltName: the kind of certificate etcd's gateway accepts once auth is on.
  await issue(
    "client-nocn",
    "/O=etcd-edge tests",
    "ca",
    "subjectAltName=DNS:client.test\nextendedKeyUsage=clientAuth\n",
  );
  await issue(
    "stranger",
    "/O=etcd-edge tests",
    "other-ca",
    "subjectAltName=DNS:stranger.test\nextendedKeyUsage=clientAuth\n",
  );
}

interface TlsMember {
  url: string;
  etcdctl(...args: string[]): Promise<string>;
  stop(): Promise<void>;
}

async function startTlsMember(dir: string, name: string, clientCertAuth: boolean): Promise<TlsMember> {
  const [clientPort, peerPort] = [await freePort(), await freePort()];
  const url = `https://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const args = [
    "--name",
    name,
    "--data-dir",
    join(dir, `${name}.data`),
    "--listen-client-urls",
    url,
    "--advertise-client-urls",
    url,
    "--listen-peer-urls",
    peer,
    "--initial-advertise-peer-urls",
    peer,
    "--initial-cluster",
    `${name}=${peer}`,
    "--cert-file",
    join(dir, "server.crt"),
    "--key-file",
    join(dir, "server.key"),
    ...(clientCertAuth ? ["--client-cert-auth", "--trusted-ca-file", join(dir, "ca.crt")] : []),
    "--logger",
    "zap",
    "--log-outputs",
    "stderr",
  ];
  const log = openSync(join(dir, `${name}.log`), "a");
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("ETCD_")));
  // The parent-death signal ends etcd with this process, however it ends.
  // The run's etcd version (each etcd-3.x project sets it).
  const etcd = join(etcdBinDir(), "etcd");
  const child: ChildProcess = spawn(...killedWithParent(etcd, args), { stdio: ["ignore", log, log], env });
  closeSync(log);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const tls = [
    "--cacert",
    join(dir, "ca.crt"),
    "--cert",
    join(dir, "client-nocn.crt"),
    "--key",
    join(dir, "client-nocn.key"),
  ];
  const member: TlsMember = {
    url,
    etcdctl: (...more) =>
      run(join(etcdBinDir(), "etcdctl"), [`--endpoints=${url}`, ...tls, ...more], dir, {
        ...process.env,
        ETCDCTL_API: "3",
      }),
    stop: async () => {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      await member.etcdctl("endpoint", "health", "--command-timeout=1s");
      return member;
    } catch (error) {
      if (child.exitCode !== null || Date.now() > deadline) {
        await member.stop();
        throw new Error(
          `etcd ${name} did not become healthy: ${readFileSync(join(dir, `${name}.log`), "utf8").slice(-2_000)}`,
          { cause: error },
        );
      }
      await sleep(200);
    }
  }
}

let dir: string;
let mutual: TlsMember;
let privateCa: TlsMember;
const fetches: NodeFetch[] = [];

const pem = (name: string) => readFileSync(join(dir, name));
function nodeFetch(options: NodeFetchOptions): NodeFetch {
  const fetch = createNodeFetch(options);
  fetches.push(fetch);
  return fetch;
}
/** A client of a TLS member (each test gives it the fetch that holds the certificates). */
function tlsClient(member: TlsMember, options: Partial<EtcdOptions> = {}): Etcd {
  return client({ endpoints: [member.url], timeout: 5_000, retries: 1, ...options });
}
/** The EtcdError the call fails with, within 10 s. */
function typed(promise: Promise<unknown>): Promise<EtcdError> {
  return rejection(within(10_000, "the call", promise));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "etcd-edge-hardening-tls-"));
  await makePki(dir);
  [mutual, privateCa] = await Promise.all([
    startTlsMember(dir, "mtls", true),
    startTlsMember(dir, "private-ca", false),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all(fetches.map((fetch) => fetch.close()));
  await Promise.all([mutual?.stop(), privateCa?.stop()]);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("mutual TLS (--client-cert-auth) with createNodeFetch({ ca, cert, key })", () => {
  it("KV, txn, lease, watch and a lock all work", async () => {
    const fetch = nodeFetch({ ca: pem("ca.crt"), cert: pem("client-cn.crt"), key: pem("client-cn.key") });
    const etcd = tlsClient(mutual, { fetch });
    await etcd.put("mtls/k", "v1");
    expect((await etcd.get("mtls/k"))?.value).toBe("v1");
    const controller = new AbortController();
    const seen = (async () => {
      for await (const batch of etcd.watch({ prefix: "mtls/w/", signal: controller.signal })) {
        if (batch.events.length > 0) return batch.events[0]!.kv.value;
      }
      return undefined;
    })();
    await sleep(200);
    await etcd.put("mtls/w/1", "event");
    expect(await within(5_000, "watch event", seen)).toBe("event");
    controller.abort();
    const result = await etcd.withLock(
      "mtls/lock",
      async (lock) => {
        const { succeeded } = await etcd.txn().if(lock.ifHeld()).then(op.put("mtls/data", "locked")).commit();
        return succeeded;
      },
      { ttl: 5, keepAlive: "manual", timeout: 5_000 },
    );
    expect(result).toBe(true);
    expect((await etcd.get("mtls/data"))?.value).toBe("locked");
  });

  it("without a client certificate the handshake is refused: UNAVAILABLE, nothing written", async () => {
    const error = await typed(tlsClient(mutual, { fetch: nodeFetch({ ca: pem("ca.crt") }) }).put("mtls/refused", "x"));
    expect(error.code).toBe("UNAVAILABLE");
    const check = tlsClient(mutual, {
      fetch: nodeFetch({ ca: pem("ca.crt"), cert: pem("client-nocn.crt"), key: pem("client-nocn.key") }),
    });
    expect(await check.get("mtls/refused")).toBeUndefined();
  });

  it("a client certificate from another CA is refused", async () => {
    const fetch = nodeFetch({ ca: pem("ca.crt"), cert: pem("stranger.crt"), key: pem("stranger.key") });
    expect((await typed(tlsClient(mutual, { fetch }).get("mtls/k"))).code).toBe("UNAVAILABLE");
  });

  it("cert without key (or key without cert) is refused when the fetch is made", () => {
    expect(() => createNodeFetch({ ca: pem("ca.crt"), cert: pem("client-cn.crt") })).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT" }),
    );
    expect(() => createNodeFetch({ key: pem("client-cn.key") })).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT" }),
    );
  });
});

describe("a private CA without client certificates", () => {
  it("createNodeFetch({ ca }) trusts it", async () => {
    const etcd = tlsClient(privateCa, { fetch: nodeFetch({ ca: pem("ca.crt") }) });
    await etcd.put("private/k", "v");
    expect((await etcd.get("private/k"))?.value).toBe("v");
  });

  it(
    "the server certificate is verified: Node's roots alone, " + "in the global fetch or createNodeFetch(), refuse it",
    async () => {
      expect((await typed(tlsClient(privateCa).get("private/k"))).code).toBe("UNAVAILABLE");
      expect((await typed(tlsClient(privateCa, { fetch: nodeFetch({}) }).get("private/k"))).code).toBe("UNAVAILABLE");
      // The right CA but the wrong name to check the certificate against.
      const misnamed = nodeFetch({ ca: pem("ca.crt"), servername: "not-etcd.test" });
      expect((await typed(tlsClient(privateCa, { fetch: misnamed }).get("private/k"))).code).toBe("UNAVAILABLE");
    },
  );
});

describe("auth with --client-cert-auth: etcd's gateway refuses a client certificate with a Common Name", () => {
  beforeAll(async () => {
    await mutual.etcdctl("user", "add", "root", "--new-user-password=root-pw", "--interactive=false");
    await mutual.etcdctl("role", "add", "root");
    await mutual.etcdctl("user", "grant-role", "root", "root");
    await mutual.etcdctl("user", "add", "app", "--new-user-password=app-pw", "--interactive=false");
    await mutual.etcdctl("--user=root:root-pw", "role", "add", "app");
    await mutual.etcdctl("--user=root:root-pw", "role", "grant-permission", "app", "readwrite", "auth/", "--prefix");
    await mutual.etcdctl("--user=root:root-pw", "user", "grant-role", "app", "app");
    await mutual.etcdctl("auth", "enable");
  }, 60_000);

  it("with a CN: UNAUTHENTICATED saying what to change (etcd answers a plain-text 400 before any auth)", async () => {
    const fetch = nodeFetch({ ca: pem("ca.crt"), cert: pem("client-cn.crt"), key: pem("client-cn.key") });
    const error = await typed(
      tlsClient(mutual, { fetch, auth: { username: "app", password: "app-pw" } }).put("auth/k", "v"),
    );
    expect(error.code).toBe("UNAUTHENTICATED");
    expect(error.message).toMatch(/without a CN/);
  });

  it("without a CN, username and password work as usual", async () => {
    const fetch = nodeFetch({ ca: pem("ca.crt"), cert: pem("client-nocn.crt"), key: pem("client-nocn.key") });
    const etcd = tlsClient(mutual, { fetch, auth: { username: "app", password: "app-pw" } });
    await etcd.put("auth/k", "v");
    expect((await etcd.get("auth/k"))?.value).toBe("v");
    expect((await typed(etcd.put("outside", "v"))).code).toBe("PERMISSION_DENIED");
  });
});
