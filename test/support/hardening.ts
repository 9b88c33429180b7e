// Shared by the hardening-* tests: an in-memory etcd behind a fetch that counts what reaches it, and a
// helper that expects a typed rejection.
import { expect } from "vitest";
import { Etcd, EtcdError, type EtcdOptions, type Fetch } from "../../src/index.js";
import { createMockEtcd, type MockEtcd } from "../../src/testing/index.js";

export const ENDPOINT = "http://etcd.test:2379";

export interface Counted {
  mock: MockEtcd;
  /** Paths of every request that reached the in-memory member, in order. */
  calls: string[];
  etcd: Etcd;
  fetch: Fetch;
}

/** A client on a fresh in-memory member whose every request is recorded. */
export function counted(options: Partial<EtcdOptions> = {}): Counted {
  const mock = createMockEtcd();
  const calls: string[] = [];
  const fetch: Fetch = async (input, init) => {
    calls.push(new URL(input).pathname);
    return mock.fetch(input, init as RequestInit);
  };
  const etcd = new Etcd({ endpoints: [ENDPOINT], fetch, retries: 0, ...options });
  return { mock, calls, etcd, fetch };
}

/** The EtcdError `action` throws or rejects with; fails if it returns or throws anything else. */
export async function typedError(action: () => unknown): Promise<EtcdError> {
  let outcome: unknown;
  try {
    await action();
  } catch (error) {
    outcome = error;
  }
  if (outcome === undefined) throw new Error("expected an EtcdError, but the call succeeded");
  expect(outcome, String(outcome)).toBeInstanceOf(EtcdError);
  return outcome as EtcdError;
}

/** A fetch answering every call with `reply(path, init)`; counts calls. */
export function stubFetch(
  reply: (path: string, init: Parameters<Fetch>[1]) => Response | Promise<Response>,
): Fetch & { calls: string[] } {
  const calls: string[] = [];
  const fetch = async (input: string, init: Parameters<Fetch>[1]) => {
    const path = new URL(input).pathname;
    calls.push(path);
    if (init.signal.aborted) throw init.signal.reason;
    return reply(path, init);
  };
  return Object.assign(fetch, { calls });
}

export const HEADER = {
  cluster_id: "14841639068965178418",
  member_id: "10276657743932975437",
  revision: "42",
  raft_term: "2",
};

export function jsonResponse(body: unknown, status = 200): Response {
  return new Response(typeof body === "string" ? body : JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });
}
