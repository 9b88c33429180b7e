// What a waiter does with its streams (src/lock/line/wait.ts): how long each stream of its watch lives for how far
// back it waits, and what it does when that stream fails: read again at once, read after a pause, or give up.
import { afterEach, describe, expect, it, vi } from "vitest";
import { EtcdError } from "../../src/index.js";
import {
  afterStreamFailure,
  BROKEN_STREAM_PAUSE,
  WAIT_IDLE_TIMEOUT,
  waitIdleTimeout,
} from "../../src/lock/line/wait.js";
import { rejection } from "../support/async.js";

describe("waitIdleTimeout: the life of each stream of a lone waiter's watch", () => {
  it("is a line's stream's life right behind the holder, or where the wait does not know how far back it is", () => {
    expect(waitIdleTimeout(undefined)).toBe(WAIT_IDLE_TIMEOUT);
    expect(waitIdleTimeout(0)).toBe(WAIT_IDLE_TIMEOUT);
    expect(waitIdleTimeout(1)).toBe(WAIT_IDLE_TIMEOUT);
  });

  it("grows by 0.1 s per key ahead beyond the first, to at most 30 s", () => {
    expect(waitIdleTimeout(2)).toBe(WAIT_IDLE_TIMEOUT + 100);
    expect(waitIdleTimeout(11)).toBe(WAIT_IDLE_TIMEOUT + 1_000);
    expect(waitIdleTimeout(291)).toBe(30_000);
    expect(waitIdleTimeout(10_000)).toBe(30_000);
  });
});

describe("afterStreamFailure: a wait whose stream failed", () => {
  afterEach(() => {
    vi.useRealTimers();
  });
  const never = new AbortController().signal;
  const failure = (code: ConstructorParameters<typeof EtcdError>[0]) => new EtcdError(code, `a stream's ${code}`);

  it("reads again at once when the history was compacted or the stream was held back", async () => {
    vi.useFakeTimers();
    for (const code of ["COMPACTED", "STREAM_HELD_BACK"] as const) {
      let settled = false;
      const after = afterStreamFailure(failure(code), never).then(() => (settled = true));
      await vi.advanceTimersByTimeAsync(0);
      expect(settled, code).toBe(true);
      await after;
    }
  });

  it(`reads again after ${BROKEN_STREAM_PAUSE} ms when the stream broke (an outage) or timed out`, async () => {
    vi.useFakeTimers();
    for (const code of ["UNAVAILABLE", "TIMEOUT"] as const) {
      let settled = false;
      const after = afterStreamFailure(failure(code), never).then(() => (settled = true));
      await vi.advanceTimersByTimeAsync(BROKEN_STREAM_PAUSE - 1);
      expect(settled, code).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      expect(settled, code).toBe(true);
      await after;
    }
  });

  it("gives up, throwing the stream's error, on a refusal, or when the wait itself was given up", async () => {
    for (const code of ["PERMISSION_DENIED", "INVALID_ARGUMENT", "ABORTED"] as const) {
      expect((await rejection(afterStreamFailure(failure(code), never))).code).toBe(code);
    }
    const given = new AbortController();
    given.abort();
    // Even an error that would be read again: the wait's own abort ends it.
    for (const code of ["UNAVAILABLE", "COMPACTED"] as const) {
      expect((await rejection(afterStreamFailure(failure(code), given.signal))).code).toBe(code);
    }
  });

  it("a pause after a broken stream ends with the wait's abort", async () => {
    const giveUp = new AbortController();
    const after = rejection(afterStreamFailure(failure("UNAVAILABLE"), giveUp.signal));
    giveUp.abort();
    expect((await after).code).toBe("ABORTED");
  });
});
