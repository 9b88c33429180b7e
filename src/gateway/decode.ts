import { badResponse } from "../errors/catalogue.js";
import { errorFromBody, errorFromStreamLine, parseJson } from "./status.js";
import type { Schema } from "./wire.js";

/** How to read one call's answer. */
export interface Expected<T> {
  path: string;
  schema: Schema<T>;
  /** The answer is a stream of `{"result": ...}` lines of which only the first matters (lease keepalive). */
  firstLine?: boolean | undefined;
  /** A predicate never looser than `schema` that takes a well-shaped answer as it is (wire-accept.ts). */
  accept?: ((value: unknown) => boolean) | undefined;
}

/** The answer's payload, checked against its schema; any other answer becomes the error it stands for. */
export function decodeAnswer<T>(expected: Expected<T>, status: number, text: string, endpoint: string): T {
  if (status !== 200) throw errorFromBody(status, text, endpoint);
  const json = expected.firstLine ? firstLine(text) : parseJson(text);
  if (json === undefined) throw badResponse(status, text, endpoint);
  let payload: unknown = json;
  if (expected.firstLine) {
    const line = json as { result?: unknown; error?: unknown };
    if (line.error !== undefined) throw errorFromStreamLine(line.error, status, endpoint);
    payload = line.result;
  }
  if (expected.accept?.(payload)) return payload as T;
  const checked = expected.schema.safeParse(payload);
  if (!checked.success) {
    const issue = checked.error.issues[0];
    const where = issue ? `${issue.path.join(".") || "body"}: ${issue.message}` : "unknown";
    throw badResponse(status, text, endpoint, `a body that does not match ${expected.path} (${where})`);
  }
  return checked.data;
}

function firstLine(text: string): unknown {
  const newline = text.indexOf("\n");
  return parseJson(newline < 0 ? text : text.slice(0, newline));
}
