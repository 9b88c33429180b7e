import { invalidArgument } from "../errors/catalogue.js";
import { resolveFlag } from "../gateway/config.js";
import type { CallOptions, Transport } from "../gateway/transport.js";
import type { Keyspace } from "./keyspace.js";
import type { TxnBatcher } from "./txn-batch.js";
import { type AnyOp, type Compare, decodeTxn, txnCall, type TxnResult, txnRequest } from "./txn.js";

/**
 * `txn().if(...).then(...).else(...).commit()`: all conditions hold, then the `then` operations run,
 * else the `else` ones, atomically in one revision. Each part may be given once, in that order.
 */
/** A transaction built once by `txn()...prepare()`, committed as often as needed. */
export class PreparedTxn<Then extends readonly AnyOp[] = [], Else extends readonly AnyOp[] = []> {
  readonly #transport: Transport;
  readonly #keyspace: Keyspace;
  readonly #json: string;
  readonly #then: Then;
  readonly #else: Else;
  readonly #writes: boolean;
  readonly #batcher: TxnBatcher;

  /** @internal Made by `TxnBuilder.prepare()`. */
  constructor(
    transport: Transport,
    keyspace: Keyspace,
    json: string,
    then: Then,
    otherwise: Else,
    batcher: TxnBatcher,
    writes = [...then, ...otherwise].some((o) => o.writes),
  ) {
    this.#transport = transport;
    this.#keyspace = keyspace;
    this.#json = json;
    this.#then = then;
    this.#else = otherwise;
    this.#batcher = batcher;
    this.#writes = writes;
  }

  /**
   * Sends the transaction. It is resent after a failure only when it has no writes, or when the caller
   * says `idempotent: true` because its compares make a repeat a no-op (a delete guarded by the key's
   * create revision, say).
   */
  async commit(options: CallOptions & { idempotent?: boolean | undefined } = {}): Promise<TxnResult<Then, Else>> {
    const idempotent = resolveFlag(options.idempotent, "idempotent");
    const result = await this.#transport.unary(
      txnCall(this.#json, this.#writes && !idempotent ? "write" : "idempotent", this.#writes),
      options,
    );
    return decodeTxn(this.#keyspace, result, this.#then, this.#else);
  }

  /**
   * @internal Sends this transaction, which is safe to resend and reads and writes only keys that start with
   * `footprint`, together with others that callers of the same client start in the same turn (see TxnBatcher).
   */
  async commitWithOthers(footprint: string, options: CallOptions): Promise<TxnResult<Then, Else>> {
    return decodeTxn(this.#keyspace, await this.#batcher.send(this.#json, footprint, options), this.#then, this.#else);
  }
}

/**
 * A transaction being built: `txn().if(...).then(...).else(...).commit()`. All conditions hold, then the
 * `then` operations run, else the `else` ones, atomically at one revision.
 */
export class TxnBuilder<Then extends readonly AnyOp[] = [], Else extends readonly AnyOp[] = []> {
  readonly #transport: Transport;
  readonly #keyspace: Keyspace;
  readonly #batcher: TxnBatcher;
  #compares: readonly Compare[] = [];
  #then: readonly AnyOp[] = [];
  #else: readonly AnyOp[] = [];
  #stage = 0;

  /** @internal */
  constructor(transport: Transport, keyspace: Keyspace, batcher: TxnBatcher) {
    this.#transport = transport;
    this.#keyspace = keyspace;
    this.#batcher = batcher;
  }

  /** The conditions, all of which must hold (made with `cmp.*`). None: the `then` branch always runs. */
  if(...compares: Compare[]): TxnBuilder<Then, Else> {
    this.#advance(1, "if");
    this.#compares = compares;
    return this;
  }

  /** The operations to run when the conditions hold (made with `op.*`); their results are typed in order. */
  then<Ops extends AnyOp[]>(...ops: Ops): TxnBuilder<Ops, Else> {
    this.#advance(2, "then");
    this.#then = ops;
    return this as unknown as TxnBuilder<Ops, Else>;
  }

  /** The operations to run when a condition fails. */
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
  commit(options: CallOptions & { idempotent?: boolean | undefined } = {}): Promise<TxnResult<Then, Else>> {
    return this.prepare().commit(options);
  }

  /**
   * The transaction built and serialised once, to send again and again (a lock's join, a guarded update
   * in a loop): each `commit()` of the result sends the same request without building it anew.
   */
  prepare(): PreparedTxn<Then, Else> {
    const body = txnRequest(this.#keyspace, this.#compares, this.#then, this.#else);
    return new PreparedTxn(
      this.#transport,
      this.#keyspace,
      JSON.stringify(body),
      this.#then as Then,
      this.#else as Else,
      this.#batcher,
    );
  }

  #advance(stage: number, name: string): void {
    if (stage <= this.#stage) throw invalidArgument(`txn().${name}() may be called once, after if() and before else()`);
    this.#stage = stage;
  }
}
