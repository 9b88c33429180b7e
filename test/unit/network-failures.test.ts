// A network failure's message names its cause, with Node's global fetch and with etcd-edge/node's, and a
// write is `indeterminate` only when the request may have reached the server. Real failures on loopback: a
// closed port, resets, https:// to a plain-HTTP port, TLS servers (self-signed, expired, for another name, one
// demanding a client certificate), port 1, a host that does not resolve.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Etcd, type Fetch } from "../../src/index.js";
import { createNodeFetch, type NodeFetch, type NodeFetchOptions } from "../../src/node/index.js";
import { rejection, sleep } from "../support/async.js";
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

const pki = new Pki();
const endpoints: Endpoint[] = [];
const fetches: NodeFetch[] = [];
const urls: Record<string, string> = {};

async function started(name: string, endpoint: Promise<Endpoint>): Promise<void> {
  const opened = await endpoint;
  endpoints.push(opened);
  urls[name] = opened.url;
}

beforeAll(async () => {
  await pki.ca("ca");
  const server = "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n";
  await pki.issue("self-signed", { subject: "/CN=self-signed", extensions: server });
  await pki.issue("server", { subject: "/CN=server", ca: "ca", extensions: server });
  await pki.issue("elsewhere", {
    subject: "/CN=elsewhere",
    ca: "ca",
    extensions: "subjectAltName=DNS:elsewhere.test\n",
  });
  await pki.issue("expired", { subject: "/CN=expired", ca: "ca", extensions: server, days: 0 });
  await pki.issue("client", { subject: "/O=client", ca: "ca", extensions: "extendedKeyUsage=clientAuth\n" });
  const tls = (name: string) => ({ cert: pki.pem(`${name}.crt`), key: pki.pem(`${name}.key`) });
  urls.closed = await closedPortUrl();
  await Promise.all([
    started("resetAtAccept", resettingServer("accept")),
    started("resetAtRequest", resettingServer("request")),
    started("plainHttp", plainHttpServer()),
    started("selfSigned", tlsServer(tls("self-signed"))),
    started("elsewhere", tlsServer(tls("elsewhere"))),
    started("expired", tlsServer(tls("expired"))),
    started("trusted", tlsServer(tls("server"))),
    started(
      "mutual",
      tlsServer({ ...tls("server"), ca: pki.pem("ca.crt"), requestCert: true, rejectUnauthorized: true }),
    ),
  ]);
  // The expired certificate's one second of validity is over.
  await sleep(1_100);
}, 30_000);

afterAll(async () => {
  await Promise.all([...endpoints.map((e) => e.close()), ...fetches.map((f) => f.close())]);
  pki.remove();
});

type Via = "global fetch" | "etcd-edge/node";

function fetchFor(via: Via, options: NodeFetchOptions = {}): Fetch | undefined {
  if (via === "global fetch") return undefined;
  const fetch = createNodeFetch({ ca: pki.pem("ca.crt"), ...options });
  fetches.push(fetch);
  return fetch;
}

interface Row {
  name: string;
  url: () => string;
  message: RegExp;
  /** Whether a failed put may have been applied. */
  indeterminate: boolean;
}

const both: Row[] = [
  {
    name: "a closed port",
    url: () => urls.closed!,
    message: /: connection refused \(ECONNREFUSED\)$/,
    indeterminate: false,
  },
  {
    name: "a port that resets the request",
    url: () => urls.resetAtRequest!,
    message: /: the connection was reset \(ECONNRESET\)$/,
    indeterminate: true,
  },
  {
    name: "a port that resets every connection at once",
    url: () => urls.resetAtAccept!,
    message: /: the connection was reset \(ECONNRESET\)$/,
    indeterminate: false,
  },
  {
    name: "https:// to a plain-HTTP port",
    url: () => urls.plainHttp!,
    message: /: TLS handshake failed: the endpoint may not speak TLS \(ERR_SSL_WRONG_VERSION_NUMBER\)$/,
    indeterminate: false,
  },
  {
    name: "a self-signed server certificate",
    url: () => urls.selfSigned!,
    message:
      /: TLS: the server certificate is self-signed, untrusted \(DEPTH_ZERO_SELF_SIGNED_CERT\): give the fetch its CA/,
    indeterminate: false,
  },
  {
    name: "a host that does not resolve",
    url: () => UNKNOWN_HOST_URL,
    message: /: unknown host \(DNS\) \((ENOTFOUND|EAI_AGAIN)\)$/,
    indeterminate: false,
  },
];

const rows: Record<Via, Row[]> = {
  "global fetch": [
    ...both,
    {
      name: "port 1, a bad port of the Fetch standard",
      url: () => BAD_PORT_URL,
      message: /: fetch refuses this port, a "bad port" of the Fetch standard \(bad port\): nothing was sent/,
      indeterminate: false,
    },
    {
      // Node's global fetch has no way to trust a private CA but the environment.
      name: "a server certificate of a CA the fetch does not know",
      url: () => urls.trusted!,
      message:
        /: TLS: the server certificate's CA is untrusted \(UNABLE_TO_VERIFY_LEAF_SIGNATURE\): give the fetch its CA/,
      indeterminate: false,
    },
  ],
  "etcd-edge/node": [
    ...both,
    // undici's dispatch has no list of bad ports: port 1 is tried, and refused on loopback.
    {
      name: "port 1",
      url: () => BAD_PORT_URL,
      message: /: connection refused \(ECONNREFUSED\)$/,
      indeterminate: false,
    },
    {
      name: "an expired server certificate",
      url: () => urls.expired!,
      message: /: TLS: the server certificate has expired \(CERT_HAS_EXPIRED\)$/,
      indeterminate: false,
    },
    {
      name: "a server certificate for another name",
      url: () => urls.elsewhere!,
      message: /: TLS: the server certificate is for another host name \(ERR_TLS_CERT_ALTNAME_INVALID\)$/,
      indeterminate: false,
    },
    {
      name: "a server that demands a client certificate, without one",
      url: () => urls.mutual!,
      message: new RegExp(
        String.raw`: TLS: the server demands a client certificate \(ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED\): ` +
          "etcd demands one with --client-cert-auth and whenever --trusted-ca-file is set",
      ),
      indeterminate: false,
    },
  ],
};

describe.for(["global fetch", "etcd-edge/node"] as const)("a put that cannot reach etcd, through the %s", (via) => {
  it.for(rows[via])("$name: the message says why", async (row) => {
    const etcd = new Etcd({ endpoints: [row.url()], fetch: fetchFor(via), retries: 0, timeout: 5_000 });
    const error = await rejection(etcd.put("k", "v"));
    expect(error).toMatchObject({ code: "UNAVAILABLE", indeterminate: row.indeterminate });
    expect(error.message).toMatch(new RegExp(`^cannot reach ${row.url().replace(/[.]/g, "\\.")}: `));
    expect(error.message).toMatch(row.message);
  });

  it("the same failure ends a read too, with the same words", async () => {
    const etcd = new Etcd({ endpoints: [urls.closed!], fetch: fetchFor(via), retries: 0 });
    expect((await rejection(etcd.get("k"))).message).toMatch(/: connection refused \(ECONNREFUSED\)$/);
  });
});

describe("a refusal that sent nothing and would be refused again", () => {
  it("a bad port is not retried: one attempt, the message says why", async () => {
    const retries: string[] = [];
    const etcd = new Etcd({
      endpoints: [BAD_PORT_URL],
      onEvent: (e) => void (e.type === "retry" && retries.push(e.path)),
    });
    const error = await rejection(etcd.get("k"));
    expect(error.message).toMatch(/"bad port" of the Fetch standard/);
    expect(retries).toEqual([]);
  });
});

describe("etcd-edge/node with a client certificate etcd accepts", () => {
  it("the server that demands one answers", async () => {
    const fetch = fetchFor("etcd-edge/node", { cert: pki.pem("client.crt"), key: pki.pem("client.key") })!;
    const response = await fetch(`${urls.mutual}/v3/kv/range`, {
      method: "POST",
      headers: {},
      body: "{}",
      signal: new AbortController().signal,
      redirect: "manual",
    });
    expect(response.status).toBe(200);
    expect(await response.text()).toBe("{}");
  });
});
