// TLS against real etcd members (the run's version), as docs/tls.md tells a user to set it up: the
// certificates made by its openssl commands, members started with its flags, and each runtime's recipe run as
// written (Node's createNodeFetch and global fetch, Deno, Bun) in a child process, with and without the lines
// marked "mutual TLS only". Then its two traps, each with the message that names it: --trusted-ca-file
// alone demands client certificates, and a server certificate without clientAuth breaks the gateway under
// mutual TLS. Then what is refused (another CA's certificate, an untrusted server) and etcd's refusal of a
// client certificate with a Common Name once auth is enabled. Members are started and stopped by PID.
import { type ChildProcess, type SpawnOptions, spawn } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Etcd, EtcdError, type EtcdOptions, op } from "../../src/index.js";
import { createNodeFetch, type NodeFetch, type NodeFetchOptions } from "../../src/node/index.js";
import { within } from "../support/async.js";
import { runCaptured } from "../support/cli.js";
import { freePort } from "../support/ports.js";
import { Pki, run } from "../support/pki.js";
import { cleanEnv, runProcess, tail } from "../support/processes.js";
import { bundlePackage, codeBlocks, etcdCommands, type Recipe, writeRecipe } from "../support/recipes.js";
import { CLI_INVOCATIONS, ensureRuntime, INSTALL_TIMEOUT_MS } from "../support/runtimes.js";
import { etcdBinDir } from "./harness.js";

const DOC = "docs/tls.md";
/** The doc's etcd address and endpoint, and where its files are. */
const DOC_ADDRESS = "10.0.0.1";
const DOC_ENDPOINT = "https://127.0.0.1:2379";
const DOC_FILES = "/etc/etcd/";

interface TlsMember {
  url: string;
  etcdctl(...args: string[]): Promise<string>;
  stop(): Promise<void>;
}

const SETPRIV = "/usr/bin/setpriv";

/** The doc's address made loopback: the certificates and flags then serve 127.0.0.1. */
const local = (text: string) => text.replaceAll(DOC_ADDRESS, "127.0.0.1");

/** A member started with `flags` (the doc's, its endpoint replaced by a free port) in the PKI's directory. */
async function startTlsMember(pki: Pki, name: string, flags: string[]): Promise<TlsMember> {
  const [clientPort, peerPort] = [await freePort(), await freePort()];
  const url = `https://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const args = [
    ...flags.map((flag) => (flag === DOC_ENDPOINT ? url : flag)),
    ...["--name", name, "--data-dir", pki.path(`${name}.data`)],
    ...["--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", `${name}=${peer}`],
    ...["--logger", "zap", "--log-outputs", "stderr"],
  ];
  const log = openSync(pki.path(`${name}.log`), "a");
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("ETCD_")));
  // The parent-death signal ends etcd with this process, however it ends.
  // The run's etcd version (each etcd-3.x project sets it).
  const etcd = join(etcdBinDir(), "etcd");
  const options: SpawnOptions = { stdio: ["ignore", log, log], env, cwd: pki.dir };
  const child: ChildProcess = existsSync(SETPRIV)
    ? spawn(SETPRIV, ["--pdeathsig", "KILL", "--", etcd, ...args], options)
    : spawn(etcd, args, options);
  closeSync(log);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const tls = ["--cacert", pki.path("ca.pem"), "--cert", pki.path("client.pem"), "--key", pki.path("client-key.pem")];
  const member: TlsMember = {
    url,
    etcdctl: (...more) =>
      run(join(etcdBinDir(), "etcdctl"), [`--endpoints=${url}`, ...tls, ...more], pki.dir, {
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
          `etcd ${name} did not become healthy: ${readFileSync(pki.path(`${name}.log`), "utf8").slice(-2_000)}`,
          { cause: error },
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

const pki = new Pki();
const work = mkdtempSync(join(tmpdir(), "etcd-edge-tls-recipes-"));
let bundles: Record<string, string>;
/** The doc's two setups; then the traps: its private-CA flags plus --trusted-ca-file, and its mutual TLS
 * flags with a server certificate that has serverAuth alone. */
let mutual: TlsMember;
let privateCa: TlsMember;
let trustedCaAlone: TlsMember;
let serverAuthOnly: TlsMember;
const fetches: NodeFetch[] = [];

function nodeFetch(options: NodeFetchOptions): NodeFetch {
  const fetch = createNodeFetch(options);
  fetches.push(fetch);
  return fetch;
}
function tlsClient(member: TlsMember, options: Partial<EtcdOptions> = {}): Etcd {
  return new Etcd({ endpoints: [member.url], timeout: 5_000, retries: 1, ...options });
}
async function typed(promise: Promise<unknown>): Promise<EtcdError> {
  const outcome = await within(
    10_000,
    "the call",
    promise.then(
      () => undefined,
      (error: unknown) => error,
    ),
  );
  expect(outcome, "the call succeeded").toBeInstanceOf(EtcdError);
  return outcome as EtcdError;
}
const pem = (file: string) => pki.pem(file);

beforeAll(async () => {
  await pki.shell(local(codeBlocks(DOC, "## Certificates", "sh")[0]!));
  const ca = { cert: "ca.pem", key: "ca-key.pem" };
  await pki.issue("client-cn", { subject: "/CN=etcd-edge-client", ca, extensions: "extendedKeyUsage=clientAuth\n" });
  await pki.issue("no-client-auth", { subject: "/O=tests", ca, extensions: "extendedKeyUsage=serverAuth\n" });
  await pki.issue("server-auth-only", {
    subject: "/CN=etcd",
    ca,
    extensions: "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
  });
  await pki.ca("other-ca");
  await pki.issue("stranger", { subject: "/O=tests", ca: "other-ca", extensions: "extendedKeyUsage=clientAuth\n" });
  const [privateCaFlags, mutualFlags] = codeBlocks(DOC, "## Starting etcd", "sh").map((block) => {
    const [flags] = etcdCommands(local(block));
    return flags!;
  });
  const withServerAuthOnly = mutualFlags!.map((flag) =>
    flag === "server.pem" ? "server-auth-only.crt" : flag === "server-key.pem" ? "server-auth-only.key" : flag,
  );
  [mutual, privateCa, trustedCaAlone, serverAuthOnly, bundles] = await Promise.all([
    startTlsMember(pki, "mtls", mutualFlags!),
    startTlsMember(pki, "private-ca", privateCaFlags!),
    startTlsMember(pki, "trusted-ca-alone", [...privateCaFlags!, "--trusted-ca-file", "ca.pem"]),
    startTlsMember(pki, "server-auth-only", withServerAuthOnly),
    bundlePackage(work),
  ]);
}, 90_000);

afterAll(async () => {
  await Promise.all(fetches.map((fetch) => fetch.close()));
  await Promise.all([mutual, privateCa, trustedCaAlone, serverAuthOnly].map((member) => member?.stop()));
  pki.remove();
  rmSync(work, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// The recipes, run as written in child processes

type Runtime = "node" | "deno" | "bun";
type Outcome = { value: string } | { code: string; message: string; indeterminate: boolean };

/** What a recipe's client does once made: one put and its read, or the error, as one JSON line. */
const PUT_AND_GET = `
const key = "recipes/" + crypto.randomUUID();
try {
  await etcd.put(key, "written");
  console.log(JSON.stringify({ value: (await etcd.get(key))?.value }));
} catch (error) {
  console.log(JSON.stringify({ code: error.code, message: error.message, indeterminate: error.indeterminate }));
}`;

let recipes = 0;

/** Runs the doc's `runtime` code block (`heading`'s) against `member`, without the `drop` lines if given. */
async function runRecipe(
  runtime: Runtime,
  heading: string,
  member: TlsMember,
  options: { drop?: string; env?: Record<string, string> } = {},
): Promise<Outcome> {
  const recipe: Recipe = {
    code: local(codeBlocks(DOC, heading, "ts")[0]!),
    drop: options.drop,
    replace: [
      [DOC_ENDPOINT, member.url],
      [DOC_FILES, `${pki.dir}/`],
    ],
    then: PUT_AND_GET,
  };
  // Node strips a .mts file's types; Deno and Bun run TypeScript as it is.
  const file = join(work, `recipe-${++recipes}.${runtime === "node" ? "mts" : "ts"}`);
  writeRecipe(file, recipe, bundles);
  const binary = runtime === "node" ? process.execPath : await ensureRuntime(runtime);
  const invocation = CLI_INVOCATIONS[runtime];
  const result = await runProcess(binary, [...invocation.args, file], {
    cwd: work,
    env: cleanEnv({ ...invocation.env?.(work), ...options.env }),
    timeoutMs: 60_000,
  });
  const line = result.stdout.trim().split("\n").at(-1) ?? "";
  if (result.code !== 0 || !line.startsWith("{"))
    throw new Error(`${runtime} ${heading}: exit ${result.code}\n${result.stdout}\n${tail(result.stderr)}`);
  return JSON.parse(line) as Outcome;
}

const MUTUAL_ONLY = "mutual TLS only";
const written = { value: "written" };

/** The environment the doc's global-fetch command line sets. */
function globalFetchEnv(): Record<string, string> {
  const [command] = codeBlocks(DOC, "### With the global fetch", "sh");
  const [name, value] = command!.trim().split(" ")[0]!.split("=");
  return { [name!]: value!.replace(DOC_FILES, `${pki.dir}/`) };
}

describe("docs/tls.md's recipes, as written", () => {
  const slow = { timeout: INSTALL_TIMEOUT_MS };

  it("Node, createNodeFetch: mutual TLS, and a private CA alone", slow, async () => {
    expect(await runRecipe("node", "## Node (and AWS Lambda)", mutual)).toEqual(written);
    expect(await runRecipe("node", "## Node (and AWS Lambda)", privateCa, { drop: MUTUAL_ONLY })).toEqual(written);
  });

  it("Node, the global fetch with NODE_EXTRA_CA_CERTS: a private CA", slow, async () => {
    expect(await runRecipe("node", "### With the global fetch", privateCa, { env: globalFetchEnv() })).toEqual(written);
  });

  it("Deno, Deno.createHttpClient: mutual TLS, and a private CA alone", slow, async () => {
    expect(await runRecipe("deno", "## Deno", mutual)).toEqual(written);
    expect(await runRecipe("deno", "## Deno", privateCa, { drop: MUTUAL_ONLY })).toEqual(written);
  });

  it("Bun, fetch's tls option: mutual TLS, and a private CA alone", slow, async () => {
    expect(await runRecipe("bun", "## Bun", mutual)).toEqual(written);
    expect(await runRecipe("bun", "## Bun", privateCa, { drop: MUTUAL_ONLY })).toEqual(written);
  });
});

describe("trap 1: --trusted-ca-file alone demands a client certificate", () => {
  const slow = { timeout: INSTALL_TIMEOUT_MS };
  const names = /client certificate.*--trusted-ca-file/;

  it("the private-CA recipes fail, and the message names the flag; nothing was sent", slow, async () => {
    const node = await runRecipe("node", "## Node (and AWS Lambda)", trustedCaAlone, { drop: MUTUAL_ONLY });
    expect(node).toMatchObject({ code: "UNAVAILABLE", message: expect.stringMatching(names), indeterminate: false });
    // Deno sees etcd 3.4's alert, or only the connection closing after it (then the put may have been sent).
    const deno = await runRecipe("deno", "## Deno", trustedCaAlone, { drop: MUTUAL_ONLY });
    expect(deno).toMatchObject({ code: "UNAVAILABLE", message: expect.stringMatching(names) });
    // The global fetch cannot present a certificate, nor tell the refusal from a hang-up.
    const global = await runRecipe("node", "### With the global fetch", trustedCaAlone, { env: globalFetchEnv() });
    expect(global).toMatchObject({ code: "UNAVAILABLE", message: expect.stringMatching(/hung up.*--trusted-ca-file/) });
  });

  it("the mutual TLS recipe works there", slow, async () => {
    expect(await runRecipe("node", "## Node (and AWS Lambda)", trustedCaAlone)).toEqual(written);
  });
});

describe("trap 2: under mutual TLS, a server certificate without clientAuth", () => {
  it("breaks every gateway call, and the message names the missing usage; gRPC works", async () => {
    const outcome = await runRecipe("node", "## Node (and AWS Lambda)", serverAuthOnly);
    expect(outcome).toMatchObject({
      code: "UNAVAILABLE",
      indeterminate: false,
      message: expect.stringMatching(
        /^etcd's gateway could not connect to its own member \(.+\): .*needs the clientAuth extended key usage/,
      ),
    });
    await serverAuthOnly.etcdctl("put", "grpc/k", "v");
  });

  it("a client certificate without clientAuth is refused, and the message names the usage", async () => {
    const fetch = nodeFetch({ ca: pem("ca.pem"), cert: pem("no-client-auth.crt"), key: pem("no-client-auth.key") });
    const error = await typed(tlsClient(mutual, { fetch }).put("mtls/no-client-auth", "x"));
    expect(error).toMatchObject({ code: "UNAVAILABLE", indeterminate: false });
    expect(error.message).toMatch(/TLS: the server refused the client certificate.*clientAuth extended key usage/);
  });
});

// ---------------------------------------------------------------------------------------------
// Mutual TLS in depth, what is refused, and auth

describe("mutual TLS (--client-cert-auth) with createNodeFetch({ ca, cert, key })", () => {
  it("KV, txn, lease, watch and a lock all work", async () => {
    const fetch = nodeFetch({ ca: pem("ca.pem"), cert: pem("client-cn.crt"), key: pem("client-cn.key") });
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
    await new Promise((resolve) => setTimeout(resolve, 200));
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

  it("without a client certificate the handshake is refused: UNAVAILABLE saying so, nothing written", async () => {
    const error = await typed(tlsClient(mutual, { fetch: nodeFetch({ ca: pem("ca.pem") }) }).put("mtls/refused", "x"));
    expect(error).toMatchObject({ code: "UNAVAILABLE", indeterminate: false });
    expect(error.message).toMatch(/TLS: the server (demands|refused) the client certificate|demands a client cert/);
    const check = tlsClient(mutual, {
      fetch: nodeFetch({ ca: pem("ca.pem"), cert: pem("client.pem"), key: pem("client-key.pem") }),
    });
    expect(await check.get("mtls/refused")).toBeUndefined();
  });

  it("a client certificate from another CA is refused", async () => {
    const fetch = nodeFetch({ ca: pem("ca.pem"), cert: pem("stranger.crt"), key: pem("stranger.key") });
    const error = await typed(tlsClient(mutual, { fetch }).get("mtls/k"));
    expect(error.code).toBe("UNAVAILABLE");
    expect(error.message).toMatch(/TLS: the server refused the client certificate/);
  });

  it("cert without key (or key without cert) is refused when the fetch is made", () => {
    expect(() => createNodeFetch({ ca: pem("ca.pem"), cert: pem("client.pem") })).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT" }),
    );
    expect(() => createNodeFetch({ key: pem("client-key.pem") })).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT" }),
    );
  });
});

describe("npx etcd-edge locks over TLS, as etcdctl takes it", () => {
  it("--cacert, --cert and --key, or etcdctl's variables, reach a member under mutual TLS; else exit 3", async () => {
    const etcd = tlsClient(mutual, {
      fetch: nodeFetch({ ca: pem("ca.pem"), cert: pem("client.pem"), key: pem("client-key.pem") }),
    });
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("mtls/cli").lock();
    const files = { cacert: pki.path("ca.pem"), cert: pki.path("client.pem"), key: pki.path("client-key.pem") };
    const flags = ["--cacert", files.cacert, "--cert", files.cert, "--key", files.key];
    const endpoints = { ETCDCTL_ENDPOINTS: mutual.url };
    const byFlags = await runCaptured(["locks", "inspect", "mtls/cli", "--json", ...flags], endpoints);
    expect(byFlags.code).toBe(0);
    expect(JSON.parse(byFlags.out)).toMatchObject({
      kind: "mutex",
      holders: [{ key: lock.key, token: lock.revision }],
    });
    const byEnv = await runCaptured(["locks", "inspect", "mtls/cli", "--json"], {
      ...endpoints,
      ETCDCTL_CACERT: files.cacert,
      ETCDCTL_CERT: files.cert,
      ETCDCTL_KEY: files.key,
    });
    expect(byEnv.code).toBe(0);
    expect(JSON.parse(byEnv.out)).toMatchObject({ holders: [{ key: lock.key }] });
    // Without the client certificate etcd refuses the handshake: exit 3 (etcd failed), the reason on stderr.
    const refused = await runCaptured(["locks", "inspect", "mtls/cli", "--cacert", files.cacert], endpoints);
    expect(refused.code).toBe(3);
    expect(refused.err).toMatch(/client cert/);
    await lock.unlock();
    await session.close();
  });
});

describe("a private CA without client certificates", () => {
  it("the server certificate is verified: Node's roots alone refuse it, in either fetch", async () => {
    const untrusted = /TLS: the server certificate's CA is untrusted \(UNABLE_TO_VERIFY_LEAF_SIGNATURE\)/;
    expect((await typed(tlsClient(privateCa).get("private/k"))).message).toMatch(untrusted);
    expect((await typed(tlsClient(privateCa, { fetch: nodeFetch({}) }).get("private/k"))).message).toMatch(untrusted);
    // The right CA but the wrong name to check the certificate against.
    const misnamed = nodeFetch({ ca: pem("ca.pem"), servername: "not-etcd.test" });
    const error = await typed(tlsClient(privateCa, { fetch: misnamed }).get("private/k"));
    expect(error.message).toMatch(/TLS: the server certificate is for another host name/);
  });
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
    const fetch = nodeFetch({ ca: pem("ca.pem"), cert: pem("client-cn.crt"), key: pem("client-cn.key") });
    const error = await typed(
      tlsClient(mutual, { fetch, auth: { username: "app", password: "app-pw" } }).put("auth/k", "v"),
    );
    expect(error.code).toBe("UNAUTHENTICATED");
    expect(error.message).toMatch(/without a CN/);
  });

  it("without a CN (the doc's client certificate), username and password work as usual", async () => {
    const fetch = nodeFetch({ ca: pem("ca.pem"), cert: pem("client.pem"), key: pem("client-key.pem") });
    const etcd = tlsClient(mutual, { fetch, auth: { username: "app", password: "app-pw" } });
    await etcd.put("auth/k", "v");
    expect((await etcd.get("auth/k"))?.value).toBe("v");
    expect((await typed(etcd.put("outside", "v"))).code).toBe("PERMISSION_DENIED");
  });
});
