import { readFileSync } from "node:fs";
import { EtcdOperator } from "../operate/operator.js";
import { isEtcdError } from "../errors/etcd-error.js";
import { type Command, type Connection, parseCommand, USAGE, UsageError } from "./args.js";
import { formatAsked, formatList, formatLock } from "./format.js";
import { listLocks, readLock } from "./lines.js";

/** Where the CLI writes, and what it reads besides its arguments: the process's, or a test's. */
export interface CliIo {
  env: Record<string, string | undefined>;
  out(text: string): void;
  err(text: string): void;
  /** Ends `watch` (SIGINT in the bin). */
  signal?: AbortSignal | undefined;
}

/** The exit codes USAGE documents. */
export const EXIT = { done: 0, nothingHeld: 1, usage: 2, etcd: 3 } as const;

/** Runs one command line; resolves with its exit code. Never throws. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let command: Command;
  try {
    command = parseCommand(argv, io.env);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err(`etcd-edge: ${error.message}\n\n${USAGE}`);
    return EXIT.usage;
  }
  if (command.verb === "help") {
    io.out(USAGE);
    return EXIT.done;
  }
  let etcd: EtcdOperator;
  try {
    etcd = await connect(command.connection);
  } catch (error) {
    io.err(`etcd-edge: ${(error as Error).message}`);
    return EXIT.usage;
  }
  try {
    return await run(etcd, command, io);
  } catch (error) {
    if (isEtcdError(error, "INVALID_ARGUMENT")) {
      io.err(`etcd-edge: ${error.message}`);
      return EXIT.usage;
    }
    const code = isEtcdError(error) ? `${error.code}: ` : "";
    io.err(`etcd-edge: ${code}${(error as Error).message}`);
    return EXIT.etcd;
  }
}

async function run(etcd: EtcdOperator, command: Command, io: CliIo): Promise<number> {
  const { name, json, connection } = command;
  const print = (data: unknown, text: string) => io.out(json ? JSON.stringify(data) : text);
  switch (command.verb) {
    case "ls": {
      const locks = await listLocks(etcd, name, connection.timeout);
      print(locks, formatList(locks));
      return EXIT.done;
    }
    case "inspect": {
      const view = await readLock(etcd, name, connection.timeout);
      print(view ?? { name, free: true }, formatLock(name, view));
      return EXIT.done;
    }
    case "revoke":
    case "request-release": {
      const options = { reason: command.reason, key: command.key, timeout: connection.timeout };
      const done =
        command.verb === "revoke" ? await etcd.revokeLock(name, options) : await etcd.requestRelease(name, options);
      print(done === undefined ? { name, held: false } : { name, ...done }, formatAsked(command.verb, name, done));
      return done === undefined ? EXIT.nothingHeld : EXIT.done;
    }
    case "watch":
      return watch(etcd, command, io, print);
    case "help":
      return EXIT.done;
  }
}

/** Prints the line now, then after each change (a batch of events), until interrupted or `--count` changes. */
async function watch(
  etcd: EtcdOperator,
  { name, count, connection }: Command,
  io: CliIo,
  print: (data: unknown, text: string) => void,
): Promise<number> {
  const show = async (changes: number) => {
    const view = await readLock(etcd, name, connection.timeout);
    const at = new Date().toISOString();
    print({ at, changes, ...(view ?? { name, free: true }) }, `${at}\n${formatLock(name, view)}`);
  };
  await show(0);
  let changes = 0;
  try {
    for await (const _batch of etcd.watch({ prefix: `${name}/`, signal: io.signal })) {
      await show(++changes);
      if (count !== undefined && changes >= count) break;
    }
  } catch (error) {
    // Interrupted: a normal end.
    if (io.signal?.aborted && isEtcdError(error, "ABORTED")) return EXIT.done;
    throw error;
  }
  return EXIT.done;
}

async function connect(connection: Connection): Promise<EtcdOperator> {
  const { cacert, cert, key } = connection;
  const tls = cacert !== undefined || cert !== undefined || key !== undefined;
  return new EtcdOperator({
    endpoints: connection.endpoints,
    timeout: connection.timeout,
    ...(connection.user === undefined ? {} : { auth: connection.user }),
    ...(connection.namespace === undefined ? {} : { namespace: connection.namespace }),
    ...(tls ? { fetch: await tlsFetch(connection) } : {}),
  });
}

/**
 * A fetch with the TLS files given: etcd-edge/node's, over undici, an optional peer loaded only here (a plain
 * `npx etcd-edge` needs nothing installed beside the package).
 */
async function tlsFetch({ cacert, cert, key }: Connection) {
  const read = (file: string | undefined) => (file === undefined ? undefined : readFileSync(file, "utf8"));
  const files = { ca: read(cacert), cert: read(cert), key: read(key) };
  let node: typeof import("../node/index.js");
  try {
    node = await import("../node/index.js");
  } catch (error) {
    throw new Error(
      `--cacert, --cert and --key need undici beside etcd-edge (npm i undici): ${(error as Error).message}`,
    );
  }
  return node.createNodeFetch(files);
}
