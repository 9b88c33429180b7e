import { wellFormedText } from "../api/bytes.js";
import { describe, invalidArgument } from "../errors/catalogue.js";

/**
 * A lock, semaphore, election or read-write lock name, checked before anything is sent: a non-empty,
 * well-formed string. `what` names it in the error: "a lock", "an election".
 */
export function nameArg(name: unknown, what: string): string {
  if (typeof name !== "string" || name.length === 0) throw invalidArgument(`${what} name must be a non-empty string, got ${describe(name)}`);
  return wellFormedText(name);
}
