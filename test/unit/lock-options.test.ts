// Options of lock calls that bound a single request, and options refused before anything changes.
import { describe, expect, it } from "vitest";
import { rejection, sleep, within } from "../support/async.js";
import { mockClient } from "../support/mock.js";

/** The mock, except that lock joins (txns) hang once `hang` is set: a member that stopped answering. */
function stallingMock() {
  const state = { hang: false };
  const { etcd } = mockClient(
    { timeout: 10_000 },
    {
      through: (input, init, forward) =>
        state.hang && input.endsWith("/v3/kv/txn") ? new Promise(() => {}) : forward(input, init),
    },
  );
  return { state, etcd };
}

describe("lock call options", () => {
  it("tryLock's timeout bounds its one request: TIMEOUT, not the client's 10 s", async () => {
    const { state, etcd } = stallingMock();
    const session = await etcd.session({ ttl: 30 });
    state.hang = true;
    const started = performance.now();
    const error = await within(
      3_000,
      "tryLock on a hung member",
      rejection(session.mutex("m").tryLock({ timeout: 300 })),
    );
    expect(error.code).toBe("TIMEOUT");
    expect(error.message).toContain("tryLock of lock m");
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it("a bad name or tryLock timeout is INVALID_ARGUMENT naming it, before anything is sent", async () => {
    const { etcd } = stallingMock();
    const session = await etcd.session({ ttl: 30 });
    expect((await rejection(() => session.mutex(""))).message).toMatch(/^a lock name must be a non-empty string/);
    const error = await rejection(session.mutex("m").tryLock({ timeout: -1 }));
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toMatch(/^timeout /);
  });

  it("the client's timeout bounds a lock() from its start: a slow join leaves its wait only what is left", async () => {
    const slow = { next: 0 };
    const { etcd } = mockClient(
      { timeout: 1_500, attemptTimeout: 1_500 },
      {
        through: async (input, init, forward) => {
          const ms = input.endsWith("/v3/kv/txn") ? slow.next : 0;
          slow.next = 0;
          if (ms > 0) await sleep(ms);
          return forward(input, init);
        },
      },
    );
    const holder = await (await etcd.session({ ttl: 30 })).mutex("m").lock();
    const waiter = await etcd.session({ ttl: 30 });
    slow.next = 1_000;
    const started = performance.now();
    const error = await within(5_000, "a wait behind a holder", rejection(waiter.mutex("m").lock()));
    expect(error.code).toBe("TIMEOUT");
    expect(error.message).toBe("the wait for lock m timed out after 1500 ms");
    // 1.5 s from lock()'s start; a clock started at the wait would end a second later.
    expect(performance.now() - started).toBeLessThan(2_200);
    expect(holder.held).toBe(true);
  });

  it("session.close() with bad options is refused and leaves the session open; a good close still works", async () => {
    const { etcd } = stallingMock();
    const session = await etcd.session({ ttl: 30 });
    expect((await rejection(session.close({ timeout: -1 }))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(session.close({ signal: {} as never }))).code).toBe("INVALID_ARGUMENT");
    expect(session.closed).toBe(false);
    expect(session.alive).toBe(true);
    expect(await session.close()).toBe(true);
  });
});
