// The lock core's one resend loop (src/lock/resend/until-answered.ts) and what uses it for a lease: a failure
// without an answer is sent again after a pause, an answer that refused the request is final, and the resends stop
// when what they serve is over (the caller's signal, a deadline), with the last failure.
import { afterEach, describe, expect, it, vi } from "vitest";
import { EtcdError } from "../../src/index.js";
import { revokeUntilGone } from "../../src/lock/lease/keep-alive.js";
import { resendPause, untilAnswered } from "../../src/lock/resend/until-answered.js";
import { rejection, sleep } from "../support/async.js";
import { mockClient, neverAnswered } from "../support/mock.js";

afterEach(() => {
  vi.restoreAllMocks();
});

const unanswered = () => new EtcdError("UNAVAILABLE", "cannot reach etcd: connection reset");
const refused = () => new EtcdError("PERMISSION_DENIED", "etcdserver: permission denied");

/** A send that fails `failures` times with `error()`, then answers `answer`; it counts its calls. */
function flaky<T>(failures: number, error: () => unknown, answer: T) {
  const send = async () => {
    send.calls++;
    if (send.calls <= failures) throw error();
    return answer;
  };
  send.calls = 0;
  return send;
}

describe("untilAnswered", () => {
  it("sends again after each failure without an answer, until one comes", async () => {
    vi.spyOn(Math, "random").mockReturnValue(0);
    const send = flaky(3, unanswered, "answered");
    expect(await untilAnswered(send)).toBe("answered");
    expect(send.calls).toBe(4);
  });

  it("takes an answer that refused the request as final: one send", async () => {
    const send = flaky(5, refused, "never");
    expect((await rejection(untilAnswered(send))).code).toBe("PERMISSION_DENIED");
    expect(send.calls).toBe(1);
  });

  it("stops once its signal has aborted, with the last failure", async () => {
    const stop = new AbortController();
    const send = async () => {
      send.calls++;
      if (send.calls === 2) stop.abort();
      throw unanswered();
    };
    send.calls = 0;
    const error = await rejection(untilAnswered(send, { signal: stop.signal }));
    expect(error.code).toBe("UNAVAILABLE");
    expect(send.calls).toBe(2);
  });

  it("stops once `over` says so, and during a pause when its signal aborts", async () => {
    let over = false;
    const send = flaky(10, unanswered, "never");
    const ending = untilAnswered(
      () => {
        over = send.calls >= 1;
        return send();
      },
      { over: () => over },
    );
    expect((await rejection(ending)).code).toBe("UNAVAILABLE");
    expect(send.calls).toBe(2);
    vi.spyOn(Math, "random").mockReturnValue(0.999);
    const stop = new AbortController();
    const paused = untilAnswered(flaky(10, unanswered, "never"), { signal: stop.signal });
    setTimeout(() => stop.abort(), 10);
    expect((await rejection(paused)).code).toBe("UNAVAILABLE");
  });

  it("pauses with full jitter, from 50 ms doubling to 2 s at most", () => {
    vi.spyOn(Math, "random").mockReturnValue(0.999);
    expect([0, 1, 2, 3, 4, 5, 6].map((f) => Math.round(resendPause(f)))).toEqual([50, 100, 200, 400, 799, 1598, 1998]);
    vi.spyOn(Math, "random").mockReturnValue(0);
    expect(resendPause(6)).toBe(0);
  });
});

describe("revokeUntilGone", () => {
  it("a lease etcd no longer knows is gone: resolved true at once", async () => {
    const { etcd, calls } = mockClient();
    expect(await revokeUntilGone(etcd, "123456789", 5)).toBe(true);
    expect(calls.filter((path) => path === "/v3/lease/revoke")).toHaveLength(1);
  });

  it("over answers that take 400 ms (a far region): a send may take up to a TTL; the lease is revoked", async () => {
    const { etcd, mock } = mockClient(
      {},
      {
        through: async (input, init, forward) => {
          if (input.endsWith("/v3/lease/revoke")) await sleep(400);
          // A send given up on meanwhile never reached etcd.
          init.signal?.throwIfAborted();
          return forward(input, init);
        },
      },
    );
    const { id } = await etcd.lease.grant(30);
    expect(await revokeUntilGone(etcd, id, 30)).toBe(true);
    expect(mock.leases().map((lease) => String(lease.id))).not.toContain(id);
  });

  it("resends a revocation that got no answer until one comes", async () => {
    let cut = 2;
    const { etcd, mock } = mockClient(
      { retries: 0 },
      {
        through: async (input, init, forward) => {
          if (input.endsWith("/v3/lease/revoke") && cut-- > 0) {
            throw new TypeError("fetch failed", { cause: new Error("socket hang up") });
          }
          return forward(input, init);
        },
      },
    );
    const { id } = await etcd.lease.grant(30);
    vi.spyOn(Math, "random").mockReturnValue(0);
    expect(await revokeUntilGone(etcd, id, 30)).toBe(true);
    expect(mock.leases().map((lease) => String(lease.id))).not.toContain(id);
    expect(cut).toBe(-1);
  });

  it("gives up when `over` says so before it starts", async () => {
    const { etcd } = mockClient();
    const { id } = await etcd.lease.grant(30);
    expect(await revokeUntilGone(etcd, id, 30, () => true)).toBe(false);
  });

  it.each([
    [
      "refuses every connection",
      () => Promise.reject(new TypeError("fetch failed", { cause: new Error("ECONNREFUSED") })),
    ],
    // Never answers: only each send's own deadline frees it.
    ["never answers", (signal?: AbortSignal) => neverAnswered(signal)],
  ])("gives up once two TTLs have passed on a member that %s, having sent in vain", async (_, answer) => {
    const down = mockClient({ retries: 0 }, { through: (_input, init) => answer(init.signal ?? undefined) });
    const started = performance.now();
    // Two TTLs of 0.1 s: it stops within them.
    expect(await revokeUntilGone(down.etcd, "123456789", 0.1)).toBe(false);
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});
