/**
 * A few composable checks for the gateway's JSON, in the spirit of zod but small enough for the edge
 * bundle (zod itself would be a third of it). Absent and `null` mean the same: protojson omits zero values.
 */
export interface Schema<T> {
  /** The checked value, or a failure naming the first field that does not fit. */
  safeParse(value: unknown): { success: true; data: T } | { success: false; error: { issues: Issue[] } };
}

export interface Issue {
  path: Array<string | number>;
  message: string;
}

type Check<T> = (value: unknown, path: Array<string | number>) => T;

class Mismatch {
  constructor(readonly issue: Issue) {}
}

/** A schema is a check plus the zod-like `safeParse` the transport calls. */
export type Checker<T> = Check<T> & Schema<T>;

function schema<T>(check: Check<T>): Checker<T> {
  const safeParse = (value: unknown) => {
    try {
      return { success: true as const, data: check(value, []) };
    } catch (error) {
      if (error instanceof Mismatch) return { success: false as const, error: { issues: [error.issue] } };
      throw error;
    }
  };
  return Object.assign(check, { safeParse });
}

function mismatch(path: Array<string | number>, expected: string, value: unknown): never {
  throw new Mismatch({ path, message: `expected ${expected}, got ${Array.isArray(value) ? "array" : typeof value}` });
}

function primitive<T>(type: "string" | "number" | "boolean"): Checker<T | undefined> {
  return schema((value, path) => {
    if (value === undefined || value === null) return undefined;
    return typeof value === type ? (value as T) : mismatch(path, type, value);
  });
}

export const string = primitive<string>("string");
export const number = primitive<number>("number");
export const boolean = primitive<boolean>("boolean");

/** int64/uint64: protojson writes strings, but numbers are valid input too. */
export const int64: Checker<string | number | undefined> = schema((value, path) => {
  if (value === undefined || value === null) return undefined;
  return typeof value === "string" || typeof value === "number" ? value : mismatch(path, "an int64 string", value);
});

export function array<T>(item: Check<T>): Checker<T[] | undefined> {
  return schema((value, path) => {
    if (value === undefined || value === null) return undefined;
    if (!Array.isArray(value)) return mismatch(path, "an array", value);
    return value.map((element, index) => item(element, [...path, index]));
  });
}

type Shape = Record<string, Check<unknown>>;
// Every field may be absent on the wire.
type Output<S extends Shape> = { [K in keyof S]?: S[K] extends Check<infer T> ? T : never };

/** An object with these fields (unknown fields are dropped); required unless wrapped with `optional`. */
export function object<S extends Shape>(shape: S): Checker<Output<S>> {
  const keys = Object.keys(shape);
  return schema((value, path) => {
    if (typeof value !== "object" || value === null || Array.isArray(value)) return mismatch(path, "an object", value);
    const input = value as Record<string, unknown>;
    const output: Record<string, unknown> = {};
    for (const key of keys) {
      const field = input[key];
      if (field !== undefined) output[key] = shape[key]!(field, [...path, key]);
    }
    return output as Output<S>;
  });
}

export function optional<T>(check: Check<T>): Checker<T | undefined> {
  return schema((value, path) => (value === undefined || value === null ? undefined : check(value, path)));
}

/** For recursive shapes (a txn response holds txn responses). */
export function lazy<T>(get: () => Check<T>): Checker<T> {
  return schema((value, path) => get()(value, path));
}
