import { describe, invalidArgument } from "../errors/catalogue.js";
import type { EventHandler } from "../events/events.js";
import type { Fetch } from "./fetch.js";

/** What the gateway layer needs to know to move requests: where, with what, and how long. */
export interface GatewayOptions {
  /** One or more gateway URLs, e.g. `http://10.0.0.1:2379`. Calls fail over between them. */
  endpoints: string | readonly string[];
  /** A fetch implementation; by default the runtime's global `fetch`, looked up on every call. */
  fetch?: Fetch | undefined;
  /** Time budget of each call in milliseconds, retries included. Default 10 000. */
  timeout?: number | undefined;
  /**
   * Longest wait for one endpoint's answer, in milliseconds, before a call that is safe to repeat moves on
   * to the next endpoint: a silent member costs one attempt, not the whole call. Default: a third of
   * `timeout`. (A write that may not be repeated waits for its answer as long as the call's budget allows.)
   */
  attemptTimeout?: number | undefined;
  /** How many times a call that is safe to repeat is retried on another endpoint. Default 3. */
  retries?: number | undefined;
  /** Credentials for an etcd with auth enabled; the token is fetched and refreshed as needed. */
  auth?: { username: string; password: string } | undefined;
  /** Extra headers on every request (for a proxy in front of etcd, say). */
  headers?: Record<string, string> | undefined;
  /**
   * Ask members without a raft leader to fail at once instead of after ~7 s, so calls move on to a
   * healthy member. Default true.
   */
  requireLeader?: boolean | undefined;
  /**
   * Told what the SDK does as it works (requests, retries, failovers, sessions, locks, watch reconnects):
   * see {@link EtcdEvent}. Nothing is built when unset; a handler that throws never breaks a call.
   */
  onEvent?: EventHandler | undefined;
}

/** {@link GatewayOptions} checked once, defaults filled in. */
export interface GatewayConfig {
  readonly endpoints: readonly string[];
  readonly fetch: Fetch | undefined;
  readonly timeout: number;
  readonly attemptTimeout: number;
  readonly retries: number;
  readonly auth: { readonly username: string; readonly password: string } | undefined;
  readonly headers: Readonly<Record<string, string>>;
  readonly requireLeader: boolean;
  readonly onEvent: EventHandler | undefined;
}

export const DEFAULT_TIMEOUT = 10_000;
export const DEFAULT_RETRIES = 3;

/** Checks the gateway options once, with messages that say what to fix, and fills in the defaults. */
export function resolveGatewayConfig(options: GatewayOptions): GatewayConfig {
  const auth = options.auth;
  if (auth !== undefined) {
    if (typeof auth?.username !== "string" || auth.username.length === 0 || typeof auth.password !== "string") {
      throw invalidArgument("auth must be { username: string, password: string } with a non-empty username");
    }
  }
  if (options.onEvent !== undefined && typeof options.onEvent !== "function") {
    throw invalidArgument(`onEvent must be a function, got ${describe(options.onEvent)}`);
  }
  if (options.fetch !== undefined && typeof options.fetch !== "function") {
    throw invalidArgument(`fetch must be a function, got ${describe(options.fetch)}`);
  }
  const timeout = resolveTimeout(options.timeout, "timeout") ?? DEFAULT_TIMEOUT;
  return {
    endpoints: resolveEndpoints(options.endpoints),
    fetch: options.fetch,
    timeout,
    attemptTimeout: resolveTimeout(options.attemptTimeout, "attemptTimeout") ?? timeout / 3,
    retries: resolveCount(options.retries, "retries") ?? DEFAULT_RETRIES,
    auth: auth === undefined ? undefined : { username: auth.username, password: auth.password },
    headers: { ...options.headers },
    requireLeader: options.requireLeader ?? true,
    onEvent: options.onEvent,
  };
}

function resolveEndpoints(input: GatewayOptions["endpoints"]): string[] {
  const list = typeof input === "string" ? [input] : input;
  if (!Array.isArray(list) || list.length === 0) {
    throw invalidArgument('endpoints must be a non-empty array of URLs, e.g. ["http://127.0.0.1:2379"]');
  }
  return list.map((endpoint: unknown) => {
    let url: URL;
    try {
      url = new URL(String(endpoint));
    } catch {
      throw invalidArgument(`endpoint ${JSON.stringify(endpoint)} is not a URL; write it as http://host:2379`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw invalidArgument(`endpoint ${JSON.stringify(endpoint)} must use http: or https:`);
    }
    if (url.search || url.hash || url.username || url.password) {
      throw invalidArgument(
        `endpoint ${JSON.stringify(endpoint)} must be a plain base URL without query, fragment or credentials (use \`auth\`)`,
      );
    }
    return url.href.replace(/\/+$/, "");
  });
}

/** A timeout in milliseconds: positive and finite, or Infinity for "no limit". */
export function resolveTimeout(value: unknown, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "number" || Number.isNaN(value) || value <= 0) {
    throw invalidArgument(`${name} must be a positive number of milliseconds, got ${describe(value)}`);
  }
  return value;
}

function resolveCount(value: unknown, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
    throw invalidArgument(`${name} must be a whole number >= 0, got ${describe(value)}`);
  }
  return value;
}
