import * as z from "zod/mini";
import type { Schema } from "./wire.js";

/**
 * A zod/mini schema turned into a plain predicate, so that a gateway answer that matches is validated
 * without allocating: zod's parse builds a new output object (and a payload per node) for every answer,
 * which showed as a fifth of an uncontended lock's CPU. zod stays the one definition of every wire shape,
 * and the one source of every error: a payload the predicate does not accept goes to `safeParse`.
 *
 * The predicate is sound: when it says true, zod's `safeParse` of the same value succeeds. It is built from
 * closures, never `eval` or `new Function` (Workers forbid them), by walking each schema's `_zod.def`, and
 * only for the exact zod/mini classes it was written for (`_zod.constr`): anything else, a subclass that
 * shares a def type (`z.exactOptional`, `z.xor`, `z.email()`, ...), a coercion, a check other than a
 * `z.refine`, compiles to "false", and zod decides. Compiled on first use, once per schema: importing this
 * module builds nothing. Its loops go by index: a `for...of` allocates an iterator until the optimizer
 * removes it.
 */
export type WirePredicate = (value: unknown) => boolean;

/** A payload that does not match its schema, with zod's own error (so every message stays zod's). */
export class WireMismatch {
  readonly error: z.core.$ZodError;
  constructor(error: z.core.$ZodError) {
    this.error = error;
  }
}

/** The payload itself, typed as the schema's output, when it matches; otherwise what zod makes of it. */
export function checkWire<T>(schema: Schema<T>, payload: unknown): T | WireMismatch {
  if (wirePredicate(schema)(payload)) return payload as T;
  // A mismatch, or a shape the predicate does not know: zod decides (its copy drops unknown keys).
  const parsed = schema.safeParse(payload);
  return parsed.success ? parsed.data : new WireMismatch(parsed.error);
}

type AnySchema = z.core.$ZodType;

const never: WirePredicate = () => false;
const compiled = new WeakMap<AnySchema, WirePredicate>();

/** The schema's predicate, compiled on the first call for it. */
export function wirePredicate(schema: AnySchema): WirePredicate {
  let predicate = compiled.get(schema);
  if (predicate === undefined) {
    // Registered before the walk, so a schema that contains itself through a getter in its shape meets
    // this forwarder instead of recursing forever.
    let built = never;
    compiled.set(schema, (value) => built(value));
    built = withRefinements(schema, compile(schema));
    compiled.set(schema, built);
    predicate = built;
  }
  return predicate;
}

function compile(schema: AnySchema): WirePredicate {
  const { def, constr } = schema._zod;
  const is = (mini: unknown) => constr === mini;
  switch (def.type) {
    case "string":
      return is(z.ZodMiniString) && !(def as z.core.$ZodStringDef).coerce ? isString : never;
    case "number":
      // zod refuses NaN and ±Infinity.
      return is(z.ZodMiniNumber) && !(def as z.core.$ZodNumberDef).coerce ? isFiniteNumber : never;
    case "boolean":
      return is(z.ZodMiniBoolean) && !(def as z.core.$ZodBooleanDef).coerce ? isBoolean : never;
    case "optional": {
      // `undefined` (and so a missing key), never `null`; `z.exactOptional` shares the def type, not the class.
      if (!is(z.ZodMiniOptional)) return never;
      const inner = wirePredicate((def as z.core.$ZodOptionalDef).innerType);
      return (value) => value === undefined || inner(value);
    }
    case "union": {
      // The plain union: any option will do (`z.xor` and `z.discriminatedUnion` are other classes).
      if (!is(z.ZodMiniUnion)) return never;
      const options = (def as z.core.$ZodUnionDef).options.map(wirePredicate);
      return (value) => {
        for (let i = 0; i < options.length; i++) if (options[i]!(value)) return true;
        return false;
      };
    }
    case "array": {
      if (!is(z.ZodMiniArray)) return never;
      const element = wirePredicate((def as z.core.$ZodArrayDef).element);
      return (value) => {
        if (!Array.isArray(value)) return false;
        // By index, as zod reads it: a hole is `undefined`.
        for (let i = 0; i < value.length; i++) if (!element(value[i])) return false;
        return true;
      };
    }
    case "object":
      return is(z.ZodMiniObject) ? compileObject(def as z.core.$ZodObjectDef) : never;
    case "lazy": {
      if (!is(z.ZodMiniLazy)) return never;
      // The getter's schema is compiled on the first value, not now: the txn response contains itself.
      let inner: WirePredicate | undefined;
      return (value) => (inner ??= wirePredicate((schema as z.core.$ZodLazy)._zod.innerType))(value);
    }
    default:
      return never;
  }
}

/**
 * zod's object: a non-null object that is not an array, each declared key checked as zod reads it (`key in`
 * and `value[key]`); an absent key is fine only for a field that may be left out (`z.optional`). Unknown
 * keys are allowed: zod strips them, the predicate ignores them.
 */
function compileObject(def: z.core.$ZodObjectDef): WirePredicate {
  const shape = def.shape;
  // A catchall (strict or loose objects) or a symbol key is more than this was written for.
  if (def.catchall !== undefined || Object.getOwnPropertySymbols(shape).length > 0) return never;
  // zod skips a declared `__proto__` altogether.
  const keys = Object.keys(shape).filter((key) => key !== "__proto__");
  const fields = keys.map((key) => wirePredicate(shape[key]!));
  // Reading `optin` resolves a lazy field's getter (zod does the same on its first parse); it compiles nothing.
  const omittable = keys.map((key) => shape[key]!._zod.optin !== undefined && shape[key]!._zod.optout === "optional");
  return (value) => {
    if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
    const record = value as Record<string, unknown>;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const field = record[key];
      if (field === undefined) {
        // A field that may be left out takes `undefined` too, absent or present; for another, `in` tells an
        // absent key (a failure) from an explicit `undefined` (its schema decides). Most are present.
        if (omittable[i]) continue;
        if (!(key in record) || !fields[i]!(field)) return false;
      } else if (!fields[i]!(field)) return false;
    }
    return true;
  };
}

/**
 * A schema's checks: only `z.refine`'s, whose function must answer truthy (not a promise: zod would throw).
 * zod hands it its parsed copy; the predicate hands it the payload, whose declared fields hold the same
 * values, which is all a refinement typed by its schema's output can read. One that throws is zod's to run.
 */
function withRefinements(schema: AnySchema, predicate: WirePredicate): WirePredicate {
  const checks = schema._zod.def.checks ?? [];
  if (checks.length === 0) return predicate;
  const refinements: Array<(value: unknown) => unknown> = [];
  for (const check of checks) {
    const def = check._zod.def as Partial<z.core.$ZodCustomDef>;
    const constr = (check._zod as { constr?: unknown }).constr;
    if (constr !== z.ZodMiniCustom || def.check !== "custom" || typeof def.fn !== "function") return never;
    refinements.push(def.fn);
  }
  return (value) => {
    if (!predicate(value)) return false;
    for (let i = 0; i < refinements.length; i++) if (!refines(refinements[i]!, value)) return false;
    return true;
  };
}

function refines(refinement: (value: unknown) => unknown, value: unknown): boolean {
  try {
    const verdict = refinement(value);
    return Boolean(verdict) && !(verdict instanceof Promise);
  } catch {
    return false;
  }
}

const isString: WirePredicate = (value) => typeof value === "string";
const isFiniteNumber: WirePredicate = (value) => typeof value === "number" && Number.isFinite(value);
const isBoolean: WirePredicate = (value) => typeof value === "boolean";
