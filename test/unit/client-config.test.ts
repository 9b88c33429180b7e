// `new Etcd(options)`: bad options fail at once with INVALID_ARGUMENT and a message that says what to fix;
// constructing a client sends nothing.
import { http, HttpResponse } from "msw";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Etcd, EtcdError, type EtcdOptions } from "../../src/index.js";
import { A, useGateway } from "../support/gateway.js";

const server = useGateway();
let requests: string[] = [];
let fetchCalls = 0;
const fetch = async () => {
  fetchCalls++;
  return new Response("{}", { status: 200 });
};

beforeEach(() => {
  requests = [];
  fetchCalls = 0;
  // Count anything that reaches the network at all.
  server.use(
    http.all("*", ({ request }) => {
      requests.push(`${request.method} ${request.url}`);
      return HttpResponse.json({});
    }),
  );
});
afterEach(() => {
  expect(requests, "requests sent").toEqual([]);
  expect(fetchCalls, "injected fetch calls").toBe(0);
});

function construct(options: unknown): EtcdError {
  try {
    new Etcd(options as EtcdOptions);
  } catch (error) {
    expect(error).toBeInstanceOf(EtcdError);
    return error as EtcdError;
  }
  throw new Error("new Etcd(...) accepted bad options");
}

describe("endpoints", () => {
  it.each([
    ["an empty list", [], /non-empty array of URLs/],
    ["missing", undefined, /non-empty array of URLs/],
    ["a number", 2379, /non-empty array of URLs/],
    ["not a URL", ["localhost:2379x"], /is not a URL|http: or https:/],
    ["a bare host", ["etcd-a"], /is not a URL.*http:\/\/host:2379/],
    ["an ftp: URL", ["ftp://etcd-a.test:2379"], /must use http: or https:/],
    ["one bad among good ones", [A, "nope"], /"nope" is not a URL/],
  ])("%s → INVALID_ARGUMENT", (_name, endpoints, message) => {
    const error = construct({ endpoints, fetch });
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toMatch(message);
  });

  it("options that are not an object", () => {
    expect(construct(undefined).code).toBe("INVALID_ARGUMENT");
    expect(construct(null).message).toMatch(/endpoints/);
  });

  it("a URL with a query or fragment would corrupt every request path: refused", () => {
    for (const endpoint of ["http://etcd-a.test:2379/?x=1", "http://etcd-a.test:2379/#frag"]) {
      const error = construct({ endpoints: [endpoint], fetch });
      expect(error.code).toBe("INVALID_ARGUMENT");
      expect(error.message).toContain(endpoint);
    }
  });
});

describe("timeout, retries, auth, fetch", () => {
  it.each([0, -1, Number.NaN, "100", null])("timeout %s → INVALID_ARGUMENT naming timeout", (timeout) => {
    const error = construct({ endpoints: [A], fetch, timeout });
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toMatch(/^timeout must be a positive number of milliseconds/);
  });

  it.each([-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "3"])(
    "retries %s → INVALID_ARGUMENT naming retries",
    (retries) => {
      const error = construct({ endpoints: [A], fetch, retries });
      expect(error.code).toBe("INVALID_ARGUMENT");
      expect(error.message).toMatch(/^retries must be a whole number >= 0/);
    },
  );

  it.each([
    ["no username", { password: "pw" }],
    ["empty username", { username: "", password: "pw" }],
    ["no password", { username: "root" }],
    ["not an object", "root:pw"],
    ["null", null],
  ])("auth with %s → INVALID_ARGUMENT", (_name, auth) => {
    const error = construct({ endpoints: [A], fetch, auth });
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toMatch(/^auth must be \{ username: string, password: string \}/);
  });

  it("a fetch that is not a function → INVALID_ARGUMENT", () => {
    expect(construct({ endpoints: [A], fetch: "fetch" }).message).toMatch(/fetch must be a function/);
  });

  it("a bad per-call timeout fails the call without a request", async () => {
    const etcd = new Etcd({ endpoints: [A], fetch });
    await expect(etcd.get("k", { timeout: -5 })).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
  });
});

describe("constructing", () => {
  it("a valid client sends no request, with or without auth", () => {
    new Etcd({ endpoints: [A] });
    new Etcd({ endpoints: A, auth: { username: "root", password: "pw" }, timeout: 5_000, retries: 0 });
    new Etcd({ endpoints: [A], fetch, auth: { username: "root", password: "" }, namespace: "app/" });
  });

  it("fills in the defaults", () => {
    const { config } = new Etcd({ endpoints: `${A}/` });
    expect(config).toMatchObject({ endpoints: [A], timeout: 10_000, retries: 3, requireLeader: true, auth: undefined });
  });

  it("creating a watch sends nothing until it is iterated", () => {
    new Etcd({ endpoints: [A], fetch }).watch({ prefix: "p/" });
  });

  it("a bad key fails at the call with INVALID_ARGUMENT, without a request", async () => {
    const etcd = new Etcd({ endpoints: [A], fetch });
    await expect(etcd.get("")).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    await expect(etcd.put("k", "v", { lease: "12abc" })).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    await expect(etcd.range({ key: "k", limit: -1 })).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    expect(() => etcd.watch({ key: "" })).toThrow(EtcdError);
  });
});
