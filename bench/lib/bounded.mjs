// Every call the bench makes is bounded by its own timer, independently of the SDK's timeouts: the bench
// measures whether those timeouts hold, so it cannot rely on them to return.

/**
 * Settles within `ms` whatever `promise` does, as { ok, value } | { ok: false, code, error } | { ok: false,
 * code: "HUNG" }. A rejection after the bound is swallowed (it can no longer crash the run); a value that
 * arrives after it goes to `onLate` (to release a lock acquired too late, say).
 */
export function bounded(promise, ms, onLate) {
  const start = performance.now();
  return new Promise((resolve) => {
    let settled = false;
    const timer = setTimeout(() => {
      settled = true;
      resolve({ ok: false, hung: true, code: "HUNG", ms: performance.now() - start });
    }, ms);
    promise.then(
      (value) => {
        if (settled) return void onLate?.(value);
        clearTimeout(timer);
        resolve({ ok: true, value, ms: performance.now() - start });
      },
      (error) => {
        if (settled) return;
        clearTimeout(timer);
        resolve({ ok: false, error, code: errorCode(error), ms: performance.now() - start });
      },
    );
  });
}

export function errorCode(error) {
  if (typeof error?.code === "string") return error.code;
  return error?.name ?? "Error";
}

/** Counts of failure codes, printed as "TIMEOUT 12, HUNG 3". */
export class Tally {
  #counts = new Map();
  add(code, n = 1) {
    this.#counts.set(code, (this.#counts.get(code) ?? 0) + n);
  }
  merge(other) {
    for (const [code, n] of other.entries()) this.add(code, n);
  }
  entries() {
    return this.#counts.entries();
  }
  get total() {
    let sum = 0;
    for (const n of this.#counts.values()) sum += n;
    return sum;
  }
  toString() {
    return this.total === 0 ? "none" : [...this.#counts].map(([code, n]) => `${code} ${n}`).join(", ");
  }
}

export const sleep = (ms) => new Promise((resolve) => (ms > 0 ? setTimeout(resolve, ms) : setImmediate(resolve)));
