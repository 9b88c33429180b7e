/**
 * The auth token of a client: fetched once and shared by concurrent calls, dropped when the server refuses
 * it so that the next call authenticates again. How a token is obtained is the transport's business.
 */
export class AuthToken {
  readonly #login: () => Promise<string>;
  #pending: Promise<string> | undefined;
  #value: string | undefined;

  constructor(login: () => Promise<string>) {
    this.#login = login;
  }

  /** The current token, authenticating first if there is none. */
  get(): Promise<string> {
    if (this.#pending === undefined) {
      const pending = this.#login();
      this.#pending = pending;
      pending.then(
        (token) => {
          if (this.#pending === pending) this.#value = token;
        },
        () => {
          // Dropped on failure so the next call tries again.
          if (this.#pending === pending) this.#pending = undefined;
        },
      );
    }
    return this.#pending;
  }

  /** The server refused `token`: forget it, unless a newer one has replaced it already. */
  rejected(token: string): void {
    if (this.#value === token) {
      this.#pending = undefined;
      this.#value = undefined;
    }
  }
}
