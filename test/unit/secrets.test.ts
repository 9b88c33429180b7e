// No secret in an error: a proxy in front of etcd that echoes the request in its error answer (a debugging
// page, a WAF's refusal) puts the password, the auth token or a credential header into the error's body or
// message. The client knows its secrets and replaces each with "[redacted]" wherever an error keeps text.
// Real etcd with auth, and inspecting the client, a session and a lock: test/conformance/conformance-secrets.
import { inspect } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Etcd, EtcdBadResponseError, type EtcdEvent, EtcdServerError, type Fetch } from "../../src/index.js";
import { createNodeFetch } from "../../src/node/index.js";
import { rejection } from "../support/async.js";
import { header } from "../support/wire.js";
import { httpLoopback, type HttpLoopback } from "../support/loopback.js";

/** A quote and a backslash: the authenticate body carries it JSON-escaped, which must be found too. */
const PASSWORD = 'pw-"Zq7\\x9/Secret';
const TOKEN = "tok-Kx81PqLmZ.77";
const API_KEY = "key-Vb52Hh09Ww";

/** Every way the secrets could show, as sent (JSON-escaped, base64) or as given. */
const FORMS = [PASSWORD, JSON.stringify(PASSWORD).slice(1, -1), TOKEN, API_KEY, btoa(PASSWORD)];

/** Everything an error shows: inspected with every option, printed, serialised, and its causes. */
function shown(error: unknown): string {
  const parts = [
    inspect(error, { showHidden: true, depth: Number.POSITIVE_INFINITY, getters: true }),
    String(error),
    JSON.stringify(error),
  ];
  for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
    parts.push(cause.message, cause.stack ?? "", String((cause as { body?: unknown }).body));
  }
  return parts.join("\n");
}

function expectNoSecret(text: string): void {
  for (const form of FORMS) expect(text).not.toContain(form);
}

/** The request as an echoing proxy writes it back: its headers, a blank line, its body. */
function echo(request: { headers: Record<string, string | string[] | undefined> }, body: string): string {
  const headers = Object.entries(request.headers).map(([name, value]) => `${name}: ${String(value)}`);
  return `upstream refused the request:\n${headers.join("\n")}\n\n${body}`;
}

let proxy: HttpLoopback;
beforeAll(async () => {
  proxy = await httpLoopback();
});
afterAll(async () => {
  await proxy?.close();
});

const fetches: Array<[string, () => Fetch & { close?: () => Promise<void> }]> = [
  ["the global fetch", () => ((input, init) => globalThis.fetch(input, init)) as Fetch],
  ["etcd-edge/node's fetch", () => createNodeFetch({ connections: 4 })],
];

describe.each(fetches)("through %s", (_name, makeFetch) => {
  let fetch: Fetch & { close?: () => Promise<void> };
  const events: EtcdEvent[] = [];
  beforeAll(() => {
    fetch = makeFetch();
  });
  afterAll(async () => {
    await fetch.close?.();
  });
  const proxiedClient = () =>
    new Etcd({
      endpoints: [proxy.url],
      fetch,
      retries: 1,
      auth: { username: "root", password: PASSWORD },
      headers: { "x-api-key": API_KEY },
      onEvent: (event) => events.push(event),
    });

  it("the authenticate request echoed in a 502: BAD_RESPONSE without the password (old: in error.body)", async () => {
    proxy.handle((request, response, body) => {
      response.writeHead(502, { "content-type": "text/plain" });
      response.end(echo(request, body));
    });
    const error = await rejection(proxiedClient().get("k"));
    expect(error).toBeInstanceOf(EtcdBadResponseError);
    expect(error).toMatchObject({ code: "BAD_RESPONSE", status: 502 });
    // The echo did reach the client, password and all: it was redacted, not lost.
    expect(proxy.seen[0]?.body).toContain(JSON.stringify(PASSWORD));
    const body = (error as EtcdBadResponseError).body;
    expect(body).toContain('"name":"root","password":"[redacted]"');
    expect(body).toContain("x-api-key: [redacted]");
    expectNoSecret(shown(error));
    expectNoSecret(JSON.stringify(events));
  });

  it("a call echoed in a 502 after signing in: neither the token nor a credential header shows", async () => {
    proxy.handle((request, response, body) => {
      if (request.url === "/v3/auth/authenticate") {
        response.writeHead(200, { "content-type": "application/json" });
        return void response.end(JSON.stringify({ header: header(), token: TOKEN }));
      }
      response.writeHead(502, { "content-type": "text/plain" });
      response.end(echo(request, body));
    });
    const error = await rejection(proxiedClient().put("k", "v"));
    expect(error).toMatchObject({ code: "BAD_RESPONSE", status: 502 });
    expect(proxy.seen.find((request) => request.path === "/v3/kv/put")?.headers.authorization).toBe(TOKEN);
    expect((error as EtcdBadResponseError).body).toContain("authorization: [redacted]");
    expectNoSecret(shown(error));
    expectNoSecret(JSON.stringify(events));
  });

  it("an etcd-shaped error whose message quotes the password: the message is redacted, the code kept", async () => {
    proxy.handle((_request, response, body) => {
      response.writeHead(400, { "content-type": "application/json" });
      response.end(JSON.stringify({ code: 3, message: `cannot parse ${body}` }));
    });
    const error = await rejection(proxiedClient().get("k"));
    expect(error).toBeInstanceOf(EtcdServerError);
    expect(error).toMatchObject({ code: "INVALID_ARGUMENT", grpcCode: 3 });
    expect(error.message).toContain("[redacted]");
    expectNoSecret(shown(error));
  });
});

it("a fetch that fails quoting the token: UNAVAILABLE, neither its message nor its cause shows it", async () => {
  const fetch: Fetch = async (input, init) => {
    if (input.endsWith("/v3/auth/authenticate")) {
      return new Response(JSON.stringify({ header: header(), token: TOKEN }), { status: 200 });
    }
    throw new TypeError(`proxy refused ${input} with authorization ${init.headers.authorization}`);
  };
  const etcd = new Etcd({
    endpoints: ["http://etcd.test:2379"],
    fetch,
    retries: 0,
    auth: { username: "u", password: PASSWORD },
  });
  const error = await rejection(etcd.get("k"));
  expect(error.code).toBe("UNAVAILABLE");
  expect(error.cause).toBeInstanceOf(Error);
  expect(String((error.cause as Error).message)).toContain("authorization [redacted]");
  expectNoSecret(shown(error));
});

it("credential headers read [redacted] in the config and inspection, and are sent as given", async () => {
  let sent: Record<string, string> = {};
  const fetch: Fetch = async (_input, init) => {
    sent = init.headers;
    return new Response(JSON.stringify({ header: header(), count: "0" }), { status: 200 });
  };
  const etcd = new Etcd({
    endpoints: ["http://etcd.test:2379"],
    fetch,
    headers: { "x-api-key": API_KEY, authorization: TOKEN, "x-trace": "visible" },
  });
  await etcd.get("k");
  expect(sent).toMatchObject({ "x-api-key": API_KEY, authorization: TOKEN, "x-trace": "visible" });
  expect(etcd.config.headers).toEqual({ "x-api-key": "[redacted]", authorization: "[redacted]", "x-trace": "visible" });
  expectNoSecret(
    [
      inspect(etcd, { showHidden: true, depth: Number.POSITIVE_INFINITY, getters: true }),
      JSON.stringify(etcd),
      JSON.stringify(etcd.config),
      JSON.stringify(etcd.transport.config),
    ].join("\n"),
  );
});

it("a short password is redacted where the request carried it, and nowhere else in the message", async () => {
  // Every "p" of the message turned into [redacted] when the password was "p".
  const fetch: Fetch = async (_input, init) => {
    const echoed = JSON.stringify({ code: 3, message: `cannot parse proxied payload ${String(init?.body)}` });
    return new Response(echoed, { status: 400, headers: { "content-type": "application/json" } });
  };
  const client = new Etcd({ endpoints: ["http://etcd.test:2379"], fetch, auth: { username: "root", password: "p" } });
  const error = await rejection(client.get("k"));
  expect(error).toMatchObject({ code: "INVALID_ARGUMENT" });
  expect(error.message).toContain('cannot parse proxied payload {"name":"root","password":"[redacted]"}');
  expect(error.message).not.toContain('"p"');
});
