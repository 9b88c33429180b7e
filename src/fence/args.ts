import { describe, invalidArgument } from "../errors/catalogue.js";

/** A fencing token: a lock's `revision`, a positive integer. */
export function tokenArg(token: unknown): number {
  if (typeof token !== "number" || !Number.isSafeInteger(token) || token <= 0) {
    throw invalidArgument(`token must be a lock's revision (a positive integer), got ${describe(token)}`);
  }
  return token;
}

/** What a fence is kept for: a non-empty string naming the data the lock protects. */
export function resourceArg(resource: unknown): string {
  if (typeof resource !== "string" || resource.length === 0) {
    throw invalidArgument(`resource must be a non-empty string naming the data, got ${describe(resource)}`);
  }
  return resource;
}
