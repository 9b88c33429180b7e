// Bounded waiting for tests: every wait here ends by itself. `sleep` is time.ts's (a module plain Node loads too),
// offered here beside the other waits.
import { type EtcdError, isEtcdError } from "../../src/index.js";
import { sleep } from "./time.js";

export { sleep };

/** Polls `check` until it returns a value other than undefined/false; throws after `timeoutMs`. */
export async function until<T>(
  what: string,
  timeoutMs: number,
  check: () => T | Promise<T>,
  everyMs = 25,
): Promise<Exclude<T, false | undefined>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value as Exclude<T, false | undefined>;
    if (Date.now() > deadline) throw new Error(`${what}: not true within ${timeoutMs} ms`);
    await sleep(everyMs);
  }
}

/** Rejects if `promise` has not settled within `ms`. */
export function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not settled within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Whether `promise` is still pending after `ms` (it keeps running either way). */
export async function stillPending(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const marker = Symbol("pending");
  const result = await Promise.race([
    promise.then(
      () => "settled",
      () => "settled",
    ),
    sleep(ms).then(() => marker),
  ]);
  return result === marker;
}

/**
 * The EtcdError a promise rejects with, or that a call throws or rejects with (fails if it succeeds, or fails
 * with something else). Pass a call, `() => ...`, where the error may come before any promise does.
 */
export async function rejection(failing: Promise<unknown> | (() => unknown)): Promise<EtcdError> {
  try {
    await (typeof failing === "function" ? failing() : failing);
  } catch (error) {
    if (isEtcdError(error)) return error;
    throw new Error(`expected an EtcdError, got ${String(error)}`, { cause: error });
  }
  throw new Error("expected a rejection, but the promise resolved");
}
