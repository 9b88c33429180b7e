import { REDACTED, withoutSecrets } from "../errors/catalogue.js";
import { EtcdError } from "../errors/etcd-error.js";

/**
 * The client's credentials as the config shows them, and the real values behind them. The real password and
 * credential headers live only in these maps, keyed by the objects the config holds: no inspection (getters,
 * hidden properties, any depth), JSON, spread or structured clone of the config can reach them.
 */
const passwords = new WeakMap<object, string>();
const headerValues = new WeakMap<object, Readonly<Record<string, string>>>();

/** Credentials as the config holds them: the password reads `"[redacted]"`. */
export function credentials(
  username: string,
  password: string,
): { readonly username: string; readonly password: string } {
  const shown = Object.freeze({ username, password: REDACTED });
  passwords.set(shown, password);
  return shown;
}

/** The password behind credentials made by {@link credentials}; other objects are taken as they are. */
export function passwordOf(auth: { readonly password: string }): string {
  return passwords.get(auth) ?? auth.password;
}

/**
 * Headers that carry credentials: their values are shown redacted and kept out of errors. Named for what
 * they are (authorization, cookie) or for what they hold (a token, a secret, a password, an API key).
 */
const CREDENTIAL_HEADER = /^(?:proxy-)?authorization$|^cookie$|token|secret|passw|api-?key/;

export function isCredentialHeader(name: string): boolean {
  return CREDENTIAL_HEADER.test(name);
}

/** Headers as the config holds them (credential values redacted), the real ones kept behind. */
export function concealHeaders(headers: Record<string, string>): Readonly<Record<string, string>> {
  const shown: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) shown[name] = isCredentialHeader(name) ? REDACTED : value;
  Object.freeze(shown);
  headerValues.set(shown, Object.freeze({ ...headers }));
  return shown;
}

/** The headers to send: the real values behind headers made by {@link concealHeaders}. */
export function headersOf(shown: Readonly<Record<string, string>>): Readonly<Record<string, string>> {
  return headerValues.get(shown) ?? shown;
}

/** How many of its latest tokens a client keeps out of its errors (a replaced token may still be valid). */
const TOKENS_KEPT = 8;

/**
 * Every secret a client sends (its password, its credential headers, the tokens it was given), so that the
 * errors it throws never show one: a proxy that echoes the request in its error page would put them in the
 * error's body or message.
 */
export class Secrets {
  readonly #fixed: string[];
  readonly #tokens: string[] = [];

  constructor(config: {
    readonly auth: { readonly password: string } | undefined;
    readonly headers: Readonly<Record<string, string>>;
  }) {
    const sent = headersOf(config.headers);
    this.#fixed = Object.keys(sent)
      .filter(isCredentialHeader)
      .map((name) => sent[name]!);
    if (config.auth !== undefined) this.#fixed.push(passwordOf(config.auth));
  }

  /** A token the client was given: from now on a secret too. */
  addToken(token: string): void {
    if (this.#tokens.includes(token)) return;
    this.#tokens.push(token);
    if (this.#tokens.length > TOKENS_KEPT) this.#tokens.shift();
  }

  /** `thrown` without any of these secrets (the same value when it shows none). */
  redact(thrown: unknown): unknown {
    return withoutSecrets(thrown, [...this.#fixed, ...this.#tokens]);
  }
}

/**
 * The auth token of a client: fetched once and shared by concurrent calls, dropped when the server refuses
 * it so that the next call authenticates again. How a token is obtained is the transport's business.
 */
export class AuthToken {
  readonly #login: () => Promise<string>;
  readonly #secrets: Secrets | undefined;
  #pending: Promise<string> | undefined;
  #value: string | undefined;

  /** `secrets` is told every token obtained, to keep it out of errors. */
  constructor(login: () => Promise<string>, secrets?: Secrets) {
    this.#login = login;
    this.#secrets = secrets;
  }

  /**
   * The current token, authenticating first if there is none. Every caller keeps what the login gave in its
   * own continuation: in Workers a login belongs to the request that started it, and if that request ends
   * first the login never settles there, nor does anything that request chained to it; the other callers
   * see it fail, drop it, and authenticate again.
   */
  get(relogin = true): Promise<string> {
    if (this.#value !== undefined) return Promise.resolve(this.#value);
    const pending = (this.#pending ??= this.#login());
    return pending.then(
      (token) => {
        this.#secrets?.addToken(token);
        if (this.#pending === pending) this.#value = token;
        return token;
      },
      (error: unknown) => {
        // Dropped on failure so the next call tries again.
        if (this.#pending === pending) this.#pending = undefined;
        // Not etcd's answer but a login the runtime dropped (above): this caller signs in itself, once.
        if (relogin && !(error instanceof EtcdError)) return this.get(false);
        throw error;
      },
    );
  }

  /** The server refused `token`: forget it, unless a newer one has replaced it already. */
  rejected(token: string): void {
    if (this.#value === token) {
      this.#pending = undefined;
      this.#value = undefined;
    }
  }
}
