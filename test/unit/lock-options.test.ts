// Options of lock calls that bound a single request, and options refused before anything changes.
import { describe, expect, it } from "vitest";
import { rejection, within } from "../support/async.js";
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
    expect(performance.now() - started).toBeLessThan(2_000);
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
