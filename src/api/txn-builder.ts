import { invalidArgument } from "../errors/catalogue.js";
import { resolveFlag } from "../gateway/config.js";
import type { CallOptions, Transport } from "../gateway/transport.js";
import * as wire from "../gateway/wire.js";
import type { Keyspace } from "./keyspace.js";
import { type AnyOp, type Compare, decodeTxn, type TxnResult, txnRequest } from "./txn.js";

/**
 * `txn().if(...).then(...).else(...).commit()`: all conditions hold, then the `then` operations run,
 * else the `else` ones, atomically in one revision. Each part may be given once, in that order.
 */
export class TxnBuilder<Then extends readonly AnyOp[] = [], Else extends readonly AnyOp[] = []> {
  readonly #transport: Transport;
  readonly #keyspace: Keyspace;
  #compares: readonly Compare[] = [];
  #then: readonly AnyOp[] = [];
  #else: readonly AnyOp[] = [];
  #stage = 0;

  /** @internal */
  constructor(transport: Transport, keyspace: Keyspace) {
    this.#transport = transport;
    this.#keyspace = keyspace;
  }

  if(...compares: Compare[]): TxnBuilder<Then, Else> {
    this.#advance(1, "if");
    this.#compares = compares;
    return this;
  }

  then<Ops extends AnyOp[]>(...ops: Ops): TxnBuilder<Ops, Else> {
    this.#advance(2, "then");
    this.#then = ops;
    return this as unknown as TxnBuilder<Ops, Else>;
  }

  else<Ops extends AnyOp[]>(...ops: Ops): TxnBuilder<Then, Ops> {
    this.#advance(3, "else");
    this.#else = ops;
    return this as unknown as TxnBuilder<Then, Ops>;
  }

  /**
   * Sends the transaction. It is resent after a failure only when it has no writes, or when the caller
   * says `idempotent: true` because its compares make a repeat a no-op (a delete guarded by the key's
   * create revision, say).
   */
  async commit(options: CallOptions & { idempotent?: boolean | undefined } = {}): Promise<TxnResult<Then, Else>> {
    const body = txnRequest(this.#keyspace, this.#compares, this.#then, this.#else);
    const idempotent = resolveFlag(options.idempotent, "idempotent");
    const writes = [...this.#then, ...this.#else].some((o) => o.writes);
    const result = await this.#transport.unary(
      { path: "/v3/kv/txn", body, schema: wire.txnResponse, retry: writes && !idempotent ? "write" : "idempotent", writes },
      options,
    );
    return decodeTxn(this.#keyspace, result, this.#then as Then, this.#else as Else);
  }

  #advance(stage: number, name: string): void {
    if (stage <= this.#stage) throw invalidArgument(`txn().${name}() may be called once, after if() and before else()`);
    this.#stage = stage;
  }
}

