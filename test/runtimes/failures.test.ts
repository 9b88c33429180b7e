// A network failure's message names its cause in the packed package as each command-line runtime exposes it
// (Node's undici codes, Bun's codes, Deno's messages), and a put is `indeterminate` only when the request may
// have reached the server. scenario/failures.mjs makes one put per endpoint; the endpoints fail on loopback.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BAD_PORT_URL,
  type Endpoint,
  plainHttpServer,
  resettingServer,
  tlsServer,
  UNKNOWN_HOST_URL,
} from "../support/broken-endpoints.js";
import { closedPortUrl } from "../support/loopback.js";
import { Pki } from "../support/pki.js";
import { cleanEnv, runProcess, tail } from "../support/processes.js";
import { CLI_INVOCATIONS, ensureRuntime, INSTALL_TIMEOUT_MS, project, RUN_TIMEOUT_MS } from "../support/runtimes.js";

const pki = new Pki();
const endpoints: Endpoint[] = [];
const urls: Record<string, string> = { badPort: BAD_PORT_URL, unknownHost: UNKNOWN_HOST_URL };

beforeAll(async () => {
  await pki.issue("self-signed", {
    subject: "/CN=self-signed",
    extensions: "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
  });
  urls.closed = await closedPortUrl();
  const named = { reset: resettingServer("request"), plainHttp: plainHttpServer() };
  const tls = tlsServer({ cert: pki.pem("self-signed.crt"), key: pki.pem("self-signed.key") });
  for (const [name, started] of Object.entries({ ...named, selfSigned: tls })) {
    const endpoint = await started;
    endpoints.push(endpoint);
    urls[name] = endpoint.url;
  }
}, 30_000);

afterAll(async () => {
  await Promise.all(endpoints.map((endpoint) => endpoint.close()));
  pki.remove();
});

interface Expected {
  message: RegExp;
  /** A reset after the request went out leaves a put undecided; every other failure here sent nothing. */
  indeterminate: boolean;
}

const refused = { message: /: connection refused \(/, indeterminate: false };
const common: Record<string, Expected> = {
  closed: refused,
  reset: { message: /: the connection was reset \(/, indeterminate: true },
  plainHttp: { message: /: TLS handshake failed: the endpoint may not speak TLS/, indeterminate: false },
  unknownHost: { message: /: unknown host \(DNS\) \(/, indeterminate: false },
};
const badPort = { message: /: fetch refuses this port, a "bad port" .*: nothing was sent/, indeterminate: false };
const selfSigned = { message: /: TLS: the server certificate is self-signed, untrusted \(/, indeterminate: false };

const rows: Array<{ runtime: "node24" | "deno" | "bun"; expected: Record<string, Expected> }> = [
  { runtime: "node24", expected: { ...common, badPort, selfSigned } },
  {
    runtime: "deno",
    // rustls names a self-signed certificate that is no CA's an unknown issuer.
    expected: {
      ...common,
      badPort,
      selfSigned: { message: /: TLS: the server certificate's CA is untrusted \(/, indeterminate: false },
    },
  },
  // Bun keeps no list of bad ports: port 1 is tried, and refused on loopback.
  { runtime: "bun", expected: { ...common, badPort: refused, selfSigned } },
];

describe("network failures in the packed package", () => {
  it.for(rows)("$runtime: each message names its cause", { timeout: INSTALL_TIMEOUT_MS }, async (row) => {
    const binary = await ensureRuntime(row.runtime);
    const invocation = CLI_INVOCATIONS[row.runtime === "node24" ? "node" : row.runtime];
    const result = await runProcess(binary, [...invocation.args, "failures.mjs", JSON.stringify(urls)], {
      cwd: project(),
      env: cleanEnv(invocation.env?.(project())),
      timeoutMs: RUN_TIMEOUT_MS,
    });
    const context = `exit ${result.code}\n${tail(result.stderr)}\n${result.stdout}`;
    expect(result.code, context).toBe(0);
    const report = JSON.parse(result.stdout) as Record<
      string,
      { code: string; message: string; indeterminate: boolean }
    >;
    for (const [name, expected] of Object.entries(row.expected)) {
      const seen = report[name];
      expect(seen?.code, `${name}: ${context}`).toBe("UNAVAILABLE");
      expect(seen?.message, name).toMatch(new RegExp(`^cannot reach ${urls[name]!.replace(/[.]/g, "\\.")}: `));
      expect(seen?.message, name).toMatch(expected.message);
      expect(seen?.indeterminate, `${name}: ${seen?.message}`).toBe(expected.indeterminate);
    }
  });
});
