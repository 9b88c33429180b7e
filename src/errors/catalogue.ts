/**
 * Every error the SDK throws is made here, so codes, classes and wording stay consistent and a reader finds
 * them in one place. Grouped by the concept they belong to.
 */
import {
  EtcdBadResponseError,
  EtcdCompactedError,
  EtcdError,
  type EtcdErrorCode,
  type EtcdErrorDetails,
  EtcdServerError,
  EtcdTimeoutError,
} from "./etcd-error.js";

const BODY_PREVIEW = 512;

// --- arguments -------------------------------------------------------------------------------------------

/** Bad input from the caller, refused before anything is sent. */
export function invalidArgument(message: string): EtcdError {
  return new EtcdError("INVALID_ARGUMENT", message);
}

/** A value as an error message shows it: its type and, for primitives, the value. */
export function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "function") return "a function";
  if (typeof value !== "object") return `${typeof value} ${String(value)}`;
  // Any object, even one without a prototype or with a `constructor` that is not a class.
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === "string" && name.length > 0 ? name : "an object";
}

// --- calls: time, abort, network -------------------------------------------------------------------------

export function timedOut(
  timeout: number,
  details: EtcdErrorDetails & { what?: string | undefined; hint?: string | undefined } = {},
): EtcdTimeoutError {
  return new EtcdTimeoutError(timeout, details);
}

/** A wait for a lock, permit or leadership (`what`: "lock x") outlasted its `timeout`; its key was deleted. */
export function waitTimedOut(what: string, timeout: number, cause?: unknown): EtcdTimeoutError {
  return new EtcdTimeoutError(timeout, { what: `the wait for ${what}`, cause });
}

/**
 * The caller's signal aborted; its reason is the cause. An EtcdError reason (a lost session, say) keeps its
 * code, and is returned as is unless this call's write was left undecided.
 */
export function aborted(reason: unknown, endpoint?: string, indeterminate = false): EtcdError {
  if (reason instanceof EtcdError) return indeterminate ? undecided(reason) : reason;
  return new EtcdError("ABORTED", "the operation was aborted", { cause: reason, endpoint, indeterminate });
}

/**
 * `error` for a write that was sent and whose answer was lost: the same error, marked `indeterminate`, so
 * the caller knows the write may have been applied.
 */
export function undecided(error: EtcdError): EtcdError {
  if (error.indeterminate) return error;
  const details = { cause: error.cause ?? error, endpoint: error.endpoint, indeterminate: true };
  if (error instanceof EtcdServerError)
    return new EtcdServerError(error.code, error.message, {
      ...details,
      grpcCode: error.grpcCode,
      httpStatus: error.httpStatus,
    });
  if (error instanceof EtcdBadResponseError)
    return new EtcdBadResponseError(error.message, { ...details, status: error.status, body: error.body });
  if (error instanceof EtcdTimeoutError) return new EtcdTimeoutError(error.timeout, details);
  return new EtcdError(error.code, error.message, details);
}

/** No endpoint could serve the call: the connection failed or broke. */
export function unavailable(message: string, details: EtcdErrorDetails = {}): EtcdError {
  return new EtcdError("UNAVAILABLE", message, details);
}

/**
 * A watch stream's first message came only when the stream ended, `waitedMs` after it was opened: something
 * between the client and etcd (a proxy, a load balancer) holds streamed answers back until they are complete.
 */
export function streamHeldBack(endpoint: string, waitedMs: number): EtcdError {
  return new EtcdError(
    "STREAM_HELD_BACK",
    `the watch stream from ${endpoint} gave its first message only as it ended, ${Math.round(waitedMs)} ms after ` +
      "it opened (etcd sends one at once): a proxy or load balancer between buffers streamed answers. Let it " +
      "stream: nginx `proxy_http_version 1.1; proxy_buffering off;`, HAProxy `option http-no-delay`, Caddy " +
      "`flush_interval -1`, a cloud load balancer or tunnel with response streaming (docs/deploying.md)",
    { endpoint },
  );
}

/** No fetch to send with: neither injected nor global. */
export function noFetch(): EtcdError {
  return invalidArgument("no global fetch in this runtime: pass `fetch` in the Etcd options");
}

// --- network failures: why an endpoint could not be reached --------------------------------------------

/** The request could not reach `endpoint`; `why` names the reason the runtime gave, in plain words. */
export function unreachable(endpoint: string, why: string, details: EtcdErrorDetails): EtcdError {
  return unavailable(`cannot reach ${endpoint}: ${why}`, { ...details, endpoint });
}

/**
 * etcd's JSON gateway could not open its gRPC connection to its own member. Over TLS this is the server
 * certificate without the clientAuth extended key usage: the gateway presents it as its client certificate,
 * which etcd checks once it checks client certificates at all.
 */
export function gatewayCannotDial(error: EtcdServerError): EtcdServerError {
  const { code, message, endpoint, grpcCode, httpStatus } = error;
  const why =
    `etcd's gateway could not connect to its own member (${message}): with --client-cert-auth or ` +
    "--trusted-ca-file, the server certificate needs the clientAuth extended key usage too (etcd-edge's docs/tls.md)";
  return serverError(code, why, { cause: error, endpoint, grpcCode, httpStatus });
}

// --- answers from etcd -----------------------------------------------------------------------------------

/** etcd answered with an error status. */
export function serverError(
  code: EtcdErrorCode,
  message: string,
  details: EtcdErrorDetails & { grpcCode: number; httpStatus: number },
): EtcdServerError {
  return new EtcdServerError(code, message, details);
}

export function compacted(message: string, compactRevision: number | undefined, endpoint?: string): EtcdCompactedError {
  return new EtcdCompactedError(message, compactRevision, { endpoint });
}

/** Whatever answered was not etcd's gateway speaking its JSON. */
export function badResponse(status: number, text: string, endpoint?: string, reason?: string): EtcdBadResponseError {
  const body = preview(text, BODY_PREVIEW);
  const what = reason ?? (text.length === 0 ? "an empty body" : "a body that is not the gateway's JSON");
  // No such path there: not etcd's gateway (its peer port, its metrics, another server), so nothing was applied.
  const hint =
    reason === undefined && status === 404
      ? ": is this etcd's client port (2379 by default, its --listen-client-urls), not its peer port (2380)?"
      : "";
  return new EtcdBadResponseError(
    `unexpected response from ${endpoint ?? "etcd"}: HTTP ${status} with ${what}${hint}`,
    { status, body, endpoint },
  );
}

/** A field of an answer that passed the schema but cannot be used (an integer beyond 2^53, say). */
export function badField(field: string, value: unknown, problem: string): EtcdBadResponseError {
  const shown = preview(String(value), 64);
  return new EtcdBadResponseError(`unexpected response from etcd: ${field} ${shown} ${problem}`, {
    status: 200,
    body: `${field}: ${preview(String(value), BODY_PREVIEW)}`,
  });
}

function preview(text: string, length: number): string {
  return text.length > length ? `${text.slice(0, length)}…` : text;
}

/** A 3xx (or a browser's opaque redirect, status 0): etcd never redirects, and following one would send the
 * request, credentials and headers wherever the answer points. */
export function redirected(status: number, endpoint?: string): EtcdBadResponseError {
  return badResponse(status, "", endpoint, "a redirect, which the client never follows (etcd does not redirect)");
}

/**
 * An answer (a unary body, a keepalive's first line, one watch message) larger than the client buffers.
 * RESOURCE_EXHAUSTED as gRPC reports a message beyond a client's receive limit; the connection is closed.
 */
export function answerTooLarge(limit: number, what: string, endpoint?: string): EtcdError {
  return new EtcdError(
    "RESOURCE_EXHAUSTED",
    `${what} from ${endpoint ?? "etcd"} exceeds maxResponseBytes (${limit} bytes); the connection was closed. ` +
      "Narrow the request (a limit, keysOnly) or raise maxResponseBytes.",
    { endpoint },
  );
}

/** Something that cannot happen if etcd keeps its promises (a key vanishing inside one transaction). */
export function internal(message: string): EtcdError {
  return new EtcdError("INTERNAL", message);
}

// --- auth ------------------------------------------------------------------------------------------------

/** What a secret reads as wherever it could be shown: a config, an inspection, JSON, an error. */
export const REDACTED = "[redacted]";

/** How deep a chain of causes is followed: far past any the SDK builds, short of a cycle's end. */
const CAUSE_DEPTH = 8;

/**
 * `thrown` with every occurrence of `secrets` replaced by "[redacted]" in its message, stack and body, and in
 * its causes': a proxy that echoes the request in an error answer puts a password or token there. A secret
 * is found as sent: as is (a header, an auth token), JSON-escaped once or twice (the password in the
 * authenticate body, echoed raw or inside JSON of the proxy's own) or base64 (a key's value). An error is
 * copied, with its class and fields, only when it shows a secret; otherwise the very same value is returned.
 */
export function withoutSecrets(thrown: unknown, secrets: readonly string[]): unknown {
  const forms = secretForms(secrets);
  return forms.length === 0 ? thrown : scrubbed(thrown, forms, 0);
}

/** Secrets shorter than this are redacted where they stand as a JSON string, not as any substring. */
const SHORT_SECRET = 8;

function secretForms(secrets: readonly string[]): string[] {
  const forms = new Set<string>();
  for (const secret of secrets) {
    if (secret.length === 0) continue;
    // A short secret ("p") is found as a whole JSON string only: anywhere, it would garble every message.
    const quoted = secret.length < SHORT_SECRET ? `"${jsonEscaped(secret)}"` : secret;
    const escaped = secret.length < SHORT_SECRET ? quoted : jsonEscaped(secret);
    forms.add(quoted);
    forms.add(escaped);
    // A proxy that wraps the request's JSON in JSON of its own escapes it twice.
    forms.add(jsonEscaped(escaped));
    forms.add(btoa(String.fromCharCode(...new TextEncoder().encode(secret))));
  }
  // The longest first: one form may contain another.
  return [...forms].sort((a, b) => b.length - a.length);
}

function jsonEscaped(text: string): string {
  return JSON.stringify(text).slice(1, -1);
}

/** A quoted form keeps its quotes, so that redacted JSON is still JSON. */
function replacement(form: string): string {
  for (const quote of ['\\"', '"']) {
    if (form.length > 2 * quote.length && form.startsWith(quote) && form.endsWith(quote)) {
      return `${quote}${REDACTED}${quote}`;
    }
  }
  return REDACTED;
}

function redactText(text: string, forms: readonly string[]): string {
  let result = text;
  for (const form of forms) if (result.includes(form)) result = result.split(form).join(replacement(form));
  return result;
}

function scrubbed(value: unknown, forms: readonly string[], depth: number): unknown {
  if (typeof value === "string") return redactText(value, forms);
  if (!(value instanceof Error) || depth > CAUSE_DEPTH) return value;
  // The same class with the same fields, but for what it says; the error itself when it says no secret. (The
  // stack starts with the message: the original's, redacted, still says where the error came from.)
  const fields = Object.getOwnPropertyDescriptors(value);
  let shows = false;
  for (const field of ["message", "stack", "body", "cause"]) {
    const said = (value as unknown as Record<string, unknown>)[field];
    if (field === "cause" ? said === undefined : typeof said !== "string") continue;
    const redacted = field === "cause" ? scrubbed(said, forms, depth + 1) : redactText(said as string, forms);
    shows ||= redacted !== said;
    // Copied as a value even when unchanged: V8's `stack` is an accessor that reads nothing on a copy.
    fields[field] = { value: redacted, writable: true, configurable: true, enumerable: fields[field]?.enumerable };
  }
  return shows ? Object.create(Object.getPrototypeOf(value) as object, fields) : value;
}

export function noToken(): EtcdError {
  return new EtcdError("UNAUTHENTICATED", "etcd returned no token: is auth enabled on the cluster?");
}

/**
 * etcd's gateway refuses, with a plain-text 400, every request over a client certificate that has a Common
 * Name once auth is enabled with `--client-cert-auth` (embed/serve.go): the CN cannot name a user there.
 */
export function commonNameRefused(endpoint?: string): EtcdError {
  return new EtcdError(
    "UNAUTHENTICATED",
    `${endpoint ?? "etcd"} refuses client certificates with a Common Name on its JSON gateway while auth is enabled: ` +
      "use a client certificate without a CN (names in subjectAltName only) and authenticate with `auth`",
    { endpoint },
  );
}

// --- leases and sessions ---------------------------------------------------------------------------------

/** A lease ID as a message names it: in hex, as etcdctl prints it and as locks' keys begin (API IDs are decimal). */
export function leaseText(id: string): string {
  return /^[0-9]+$/.test(id) ? `lease ${BigInt(id).toString(16)}` : `lease ${id}`;
}

export function leaseNotFound(lease: string, cause?: unknown): EtcdError {
  return new EtcdError("LEASE_NOT_FOUND", `${leaseText(lease)} not found: it expired or was revoked`, { cause });
}

export function leaseGrantFailed(reason: string): EtcdError {
  return new EtcdError("UNKNOWN", `lease grant failed: ${reason}`);
}

/** The session's lease ended (expired, revoked, or past its deadline unrenewed); `context` says what it cut short. */
export function sessionExpired(leaseId: string, cause?: unknown, context?: string): EtcdError {
  const what = context === undefined ? "" : `: ${context}`;
  return new EtcdError("SESSION_EXPIRED", `session ${leaseText(leaseId)} has expired${what}`, { cause });
}

/**
 * etcd refused to renew a session's lease for want of permission. Since etcd 3.5.28 and 3.6.9 (CVE-2026-33413),
 * with auth on, renewing a lease needs put permission on every key attached to it (or the root role): a role
 * that lost write permission on a lock's key, or a lease shared with keys of another role, can no longer renew.
 */
export function renewalRefused(leaseId: string, cause: unknown): EtcdError {
  return new EtcdError(
    "PERMISSION_DENIED",
    `renewing ${leaseText(leaseId)} was refused: etcd needs put permission on every key attached to a lease to renew ` +
      "it (since 3.5.28 and 3.6.9): grant this user readwrite on the prefixes of the names it locks",
    { cause },
  );
}

/**
 * etcd's RBAC refused `what` (`reading key "k"`, `lock jobs/1`): the error names it and the grant it needs
 * (`read on key "k"`, `readwrite on prefix "jobs/1/"`), as etcd's own "permission denied" does not.
 */
export function refused(what: string, grant: string, cause: EtcdError): EtcdError {
  const message =
    `${what} was refused by etcd's RBAC (${cause.message}): this user's roles need ${grant} ` +
    `(etcdctl role grant-permission; etcd-edge's README, "RBAC: what a lock user needs")`;
  const details = { cause, endpoint: cause.endpoint };
  // etcd's own answer stays readable as it was (gRPC code, HTTP status); the words say what to do.
  return cause instanceof EtcdServerError
    ? new EtcdServerError("PERMISSION_DENIED", message, {
        ...details,
        grpcCode: cause.grpcCode,
        httpStatus: cause.httpStatus,
      })
    : new EtcdError("PERMISSION_DENIED", message, details);
}

/** The session was closed by its owner (`close()`); `context` says what that cut short or refused. */
export function sessionClosed(leaseId: string, context?: string): EtcdError {
  const what = context === undefined ? "" : `: ${context}`;
  return new EtcdError("SESSION_CLOSED", `session of ${leaseText(leaseId)} was closed${what}`);
}

// --- locks and elections ---------------------------------------------------------------------------------

export function locked(name: string, holder: string): EtcdError {
  return new EtcdError("LOCKED", `lock ${name} is held by ${holder}`);
}

export function lockReleased(name: string, why: string): EtcdError {
  return heldReleased(`lock ${name}`, why);
}

export function lockLost(name: string, why = "its session's lease ended", cause?: unknown): EtcdError {
  return heldLost(`lock ${name}`, why, cause);
}

/**
 * An operator asked the holder of `what` to release it (`operator.requestRelease`): the reason of its
 * `releaseRequested` signal. Nothing else changed: it is still held.
 */
export function releaseRequested(what: string, reason: string): EtcdError {
  return new EtcdError(
    "RELEASE_REQUESTED",
    `the release of ${what} was requested (operator.requestRelease): ${reason}. It is still held: release it ` +
      "when its work can stop",
  );
}

/** Whatever is held (`what`: "lock x", "permit of semaphore y", "read lock z") was released already. */
export function heldReleased(what: string, why: string): EtcdError {
  return new EtcdError("LOCK_RELEASED", `${what} is not held: ${why}`);
}

/** Whatever is held (`what`) ended before its release: the work under it was not protected to its end. */
export function heldLost(what: string, why = "its session's lease ended", cause?: unknown): EtcdError {
  return new EtcdError("LOCK_LOST", `${what} was lost: ${why}`, { cause });
}

/**
 * A key under a lock's (or election's) prefix that no contender can have made: no lease, a suffix that is not
 * its lease in hex, a deeper path (another lock's or a recipe's key, or data stored under the lock's name).
 * It would sort into the line and block it for good, so the call refuses to wait behind it.
 */
export function lockNameConflict(name: string, key: string, leaseless = false): EtcdError {
  const why = leaseless
    ? "it is bound to no lease (a plain put to a lock's key cuts it loose from its lease), so it would never expire"
    : `keys under "${name}/" belong to its contenders: keep data, other locks and other recipes elsewhere`;
  return new EtcdError("LOCK_NAME_CONFLICT", `key ${key} under lock ${name} is not a lock contender: ${why}`);
}

/** `resign()` withdrew a campaign under way: the candidate's key was deleted. */
export function campaignWithdrawn(name: string): EtcdError {
  return new EtcdError("ABORTED", `the campaign for leadership of ${name} was withdrawn by resign()`);
}

export function notLeader(name: string): EtcdError {
  return new EtcdError("NOT_LEADER", `not the leader of election ${name}`);
}

// --- recipes: semaphores, read-write locks, multi-locks ---------------------------------------------------

/** Every permit of semaphore `name` is taken, and the call was not to wait. */
export function noPermit(name: string, permits: number): EtcdError {
  return new EtcdError("LOCKED", `semaphore ${name} has all its ${permits} permits taken`);
}

/**
 * A semaphore's line holds a permit that does not agree on the number of permits: admitting by our count would
 * over-admit by theirs. `found` is that permit's count; a key that is no permit at all is LOCK_NAME_CONFLICT,
 * and its value (a lock's secret, say) is never quoted.
 */
export function permitsMismatch(name: string, permits: number | undefined, key: string, found: string): EtcdError {
  const message =
    permits === undefined
      ? `semaphore ${name}'s line does not agree on its permits: ${key} has ${found} permits`
      : `semaphore ${name} is used with ${permits} permits here, but ${key} in its line has ${found} permits`;
  return new EtcdError("PERMITS_MISMATCH", message);
}

// --- fences (etcd-edge/fence) -----------------------------------------------------------------------------

/**
 * A store refused a write fenced with `token` on `resource`: it had seen a newer token (`newest`, when the store
 * said which), so a later holder has the lock and this one lost it. Nothing of the write landed.
 */
export function fenceRefused(resource: string, token: number, newest?: number): EtcdError {
  const seen = newest === undefined ? "a newer token" : `token ${newest}`;
  return new EtcdError(
    "LOCK_LOST",
    `the write to ${resource} fenced with token ${token} was refused: the store has seen ${seen}, a later ` +
      "holder's. This holder lost its lock (its lease ended while it worked); nothing of the write landed",
  );
}

/**
 * A fenced write lost its race `attempts` times in a row: the object changed between each read and conditional
 * write, each time with no newer token. Not a lost lock: nothing says a later holder wrote.
 */
export function fenceContended(resource: string, token: number, attempts: number): EtcdError {
  return new EtcdError(
    "UNAVAILABLE",
    `the write to ${resource} fenced with token ${token} lost its race to another write ${attempts} times in a ` +
      "row, never to a newer token; nothing of it landed. Try again, or write it from fewer places at once",
  );
}

/** A store answered a fenced write with a failure of its own (not a refusal): `what` says which request. */
export function storeFailed(what: string, status: number, body: string): EtcdError {
  return new EtcdError(
    "UNAVAILABLE",
    `${what} failed with HTTP ${status}${body ? `: ${body.slice(0, BODY_PREVIEW)}` : ""}; nothing was fenced`,
  );
}
