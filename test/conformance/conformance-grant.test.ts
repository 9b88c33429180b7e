// A session's lease grant is safe to resend: the session draws the lease ID itself, so a grant whose answer was
// lost, or that went out over a connection that died silently (a sandbox thawed after its NAT forgot the
// connection), is sent again and never grants a second lease. On the mock and on real etcd.
import { describe, expect, it } from "vitest";
import type { Fetch } from "../../src/index.js";
import { freshNames, leaseAlive } from "../support/etcd.js";
import { answerLosingFetch } from "../support/outage.js";
import { useBackend } from "./backend.js";

const { backend, etcd } = useBackend();
const fresh = freshNames("grant");

describe("a session's grant", () => {
  it("whose answer was lost is sent again and finds the lease it granted: one lease, the session's", async () => {
    const fetch = answerLosingFetch(backend.fetch, (path) => path === "/v3/lease/grant");
    const before = new Set((await etcd.lease.list()).leases);
    const session = await backend.client({ fetch }).session({ ttl: 30, keepAlive: "manual" });
    expect(fetch.lost).toBe(1);
    const granted = (await etcd.lease.list()).leases.filter((id) => !before.has(id));
    expect(granted).toEqual([session.leaseId]);
    expect(session.ttl).toBe(30);
    const lock = await session.mutex(fresh()).lock();
    await lock.unlock();
    await session.close();
    expect(await leaseAlive(etcd, session.leaseId)).toBe(false);
  });

  it("that goes unanswered on a dead connection moves on after one attempt's deadline", async () => {
    let stalled = 0;
    const fetch: Fetch = (input, init) => {
      // The first grant goes nowhere: a connection that died silently never answers (until aborted).
      if (new URL(input).pathname === "/v3/lease/grant" && stalled++ === 0) {
        return new Promise((_, reject) => init.signal.addEventListener("abort", () => reject(init.signal.reason)));
      }
      return backend.fetch(input, init);
    };
    const client = backend.client({ fetch, timeout: 5_000, attemptTimeout: 300 });
    const started = performance.now();
    const session = await client.session({ ttl: 30, keepAlive: "manual" });
    expect(stalled).toBe(2);
    expect(performance.now() - started).toBeLessThan(4_000);
    await session.close();
  });
});
