import { describe, fenceRefused, invalidArgument } from "../errors/catalogue.js";
import { resourceArg, tokenArg } from "./args.js";

/** SQL as Postgres speaks it (`$1`), or as SQLite and Cloudflare D1 do (`?1`). */
export type SqlDialect = "postgres" | "sqlite";

/** A statement and its parameters, for your driver: `client.query(sql, params)`, `db.prepare(sql).bind(...params)`. */
export interface SqlStatement {
  /** The SQL text, with numbered parameters in the dialect's form. */
  sql: string;
  /** The parameters, in order. */
  params: unknown[];
}

/** The fence of a SQL write: the dialect, the resource, the holder's token, the fences' table. */
export interface SqlFenceOptions {
  /** `"postgres"`, or `"sqlite"` (also Cloudflare D1). */
  dialect: SqlDialect;
  /** What the lock protects: one fence per resource (a lock name is a good one). */
  resource: string;
  /** The holder's fencing token: `lock.revision`. */
  token: number;
  /** The fences' table (see `fenceTable`). Default `etcd_edge_fences`. */
  table?: string | undefined;
}

/**
 * A fence kept in a SQL table, one row per resource: the newest token that wrote. Each write under a lock
 * `advance`s it in the same transaction (or D1 batch) as the write; a token older than the row's is refused.
 */
export interface SqlFence {
  /**
   * Moves the resource's fence to the token unless it holds a newer one, in one statement that returns a row if
   * it did (`INSERT … ON CONFLICT DO UPDATE … WHERE … RETURNING`). Its row lock makes a later holder's advance wait
   * for this transaction: run it first, then your writes, and `check` its rows before you commit.
   */
  readonly advance: SqlStatement;
  /**
   * A condition for your writes' `WHERE`: the fence still holds this token. For a batch that cannot stop between
   * statements (D1's `batch`), guard every write with it after `advance`: a refused advance then leaves them
   * no-ops. Its parameters are numbered from `offset + 1`, after your statement's own.
   */
  guard(offset: number): SqlStatement;
  /** LOCK_LOST unless `rows` (what `advance` returned) has a row: the write must not be committed. */
  check(rows: readonly unknown[]): void;
}

const DEFAULT_TABLE = "etcd_edge_fences";
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** The fence of `resource` for a holder with `token`: the statements to run with its writes. */
export function sqlFence(options: SqlFenceOptions): SqlFence {
  const { dialect } = options;
  if (dialect !== "postgres" && dialect !== "sqlite") {
    throw invalidArgument(`dialect must be "postgres" or "sqlite" (also Cloudflare D1), got ${describe(dialect)}`);
  }
  const resource = resourceArg(options.resource);
  const token = tokenArg(options.token);
  const table = tableArg(options.table);
  const at = (n: number) => (dialect === "postgres" ? `$${n}` : `?${n}`);
  return {
    advance: {
      sql:
        `INSERT INTO ${table} (resource, token) VALUES (${at(1)}, ${at(2)}) ` +
        `ON CONFLICT (resource) DO UPDATE SET token = excluded.token WHERE ${table}.token <= excluded.token ` +
        "RETURNING token",
      params: [resource, token],
    },
    guard: (offset) => ({
      sql: `EXISTS (SELECT 1 FROM ${table} WHERE resource = ${at(offset + 1)} AND token = ${at(offset + 2)})`,
      params: [resource, token],
    }),
    check: (rows) => {
      if (rows.length === 0) throw fenceRefused(resource, token);
    },
  };
}

/** The table the fences live in, created if missing: run it once, as a migration. */
export function fenceTable(dialect: SqlDialect, table?: string): string {
  const name = tableArg(table);
  const type = dialect === "postgres" ? "BIGINT" : "INTEGER";
  return `CREATE TABLE IF NOT EXISTS ${name} (resource TEXT PRIMARY KEY, token ${type} NOT NULL)`;
}

function tableArg(table: unknown): string {
  if (table === undefined) return DEFAULT_TABLE;
  if (typeof table !== "string" || !IDENTIFIER.test(table)) {
    throw invalidArgument(`table must be a plain SQL identifier (letters, digits, _), got ${describe(table)}`);
  }
  return table;
}
