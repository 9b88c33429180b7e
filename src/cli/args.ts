import { parseArgs } from "node:util";

/** A command line the CLI could not read: exit code 2, with what to type instead. */
export class UsageError extends Error {
  override name = "UsageError";
}

/** How to reach etcd, from flags first, then the environment (etcdctl's variable names), then defaults. */
export interface Connection {
  endpoints: string[];
  user: { username: string; password: string } | undefined;
  namespace: string | undefined;
  cacert: string | undefined;
  cert: string | undefined;
  key: string | undefined;
  /** Each call's budget, in milliseconds. */
  timeout: number;
}

/** One command line, read once. */
export interface Command {
  verb: "ls" | "inspect" | "revoke" | "request-release" | "watch" | "help";
  /** The lock name (`ls`: the prefix, maybe empty). */
  name: string;
  json: boolean;
  reason: string | undefined;
  key: string | undefined;
  /** `watch`: stop after this many changes (undefined: until interrupted). */
  count: number | undefined;
  connection: Connection;
}

export const USAGE = `Usage: etcd-edge locks <command> [options]

Commands:
  ls [prefix]                   every lock, semaphore, election and read-write lock (under prefix)
  inspect <name>                holder(s), token, lease in hex and TTL left, since which revision; waiters in order
  revoke <name>                 end the holding (only it): its holder gets LOCK_LOST with --reason
  request-release <name>        ask the holder to release: its releaseRequested signal aborts with --reason
  watch <name>                  print the line each time it changes, until interrupted (or --count changes)

Options:
  --endpoints <urls>            comma-separated gateway URLs   [$ETCDCTL_ENDPOINTS, default http://127.0.0.1:2379]
  --user <name[:password]>      etcd user                      [$ETCDCTL_USER; $ETCDCTL_PASSWORD for the password]
  --namespace <prefix/>         key namespace of the clients whose locks these are
  --cacert, --cert, --key       TLS files, as etcdctl's        [$ETCDCTL_CACERT, $ETCDCTL_CERT, $ETCDCTL_KEY]
  --reason <text>               revoke, request-release: told to the holder
  --holder <key>                revoke, request-release: which of several holders (a semaphore's, readers)
  --count <n>                   watch: stop after n changes
  --timeout <ms>                each request's budget (default 5000)
  --json                        machine-readable output (watch: one JSON object per line)

Exit codes: 0 done; 1 nothing held (revoke, request-release); 2 bad usage; 3 etcd refused or did not answer.`;

const VERBS = new Set(["ls", "inspect", "revoke", "request-release", "watch"]);

/** Reads `argv` (without node and the script) and `env` once; UsageError says what is wrong. */
export function parseCommand(argv: readonly string[], env: Record<string, string | undefined>): Command {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { values, positionals } = parsed;
  const [group, verb, name, ...rest] = positionals;
  const connection = connectionOf(values, env);
  const common = { json: values.json ?? false, reason: values.reason, key: values.holder, connection };
  if (values.help || group === undefined || group === "help") {
    return { verb: "help", name: "", count: undefined, ...common };
  }
  if (group !== "locks") throw new UsageError(`unknown command "${group}": the commands are "locks <command>"`);
  if (verb === undefined || !VERBS.has(verb)) {
    throw new UsageError(`"locks" needs a command: ${[...VERBS].join(", ")}; got ${verb ?? "none"}`);
  }
  if (rest.length > 0) throw new UsageError(`unexpected argument "${rest[0]}"`);
  if (verb !== "ls" && (name === undefined || name === "")) throw new UsageError(`"locks ${verb}" needs a lock name`);
  const count = values.count === undefined ? undefined : positive(values.count, "--count");
  return { verb: verb as Command["verb"], name: name ?? "", count, ...common };
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      endpoints: { type: "string" },
      user: { type: "string" },
      namespace: { type: "string" },
      cacert: { type: "string" },
      cert: { type: "string" },
      key: { type: "string" },
      reason: { type: "string" },
      holder: { type: "string" },
      count: { type: "string" },
      timeout: { type: "string" },
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
}

function connectionOf(values: ReturnType<typeof parse>["values"], env: Record<string, string | undefined>): Connection {
  const endpoints = (values.endpoints ?? env.ETCDCTL_ENDPOINTS ?? "http://127.0.0.1:2379")
    .split(",")
    .map((endpoint) => endpoint.trim())
    .filter((endpoint) => endpoint.length > 0)
    // etcdctl takes bare host:port; the gateway is HTTP.
    .map((endpoint) => (/^[a-z]+:\/\//i.test(endpoint) ? endpoint : `http://${endpoint}`));
  if (endpoints.length === 0) throw new UsageError("--endpoints is empty: give one or more gateway URLs");
  const userText = values.user ?? env.ETCDCTL_USER;
  let user: Connection["user"];
  if (userText !== undefined) {
    const colon = userText.indexOf(":");
    const username = colon === -1 ? userText : userText.slice(0, colon);
    const password = colon === -1 ? env.ETCDCTL_PASSWORD : userText.slice(colon + 1);
    if (password === undefined) throw new UsageError("--user has no password: give user:password or $ETCDCTL_PASSWORD");
    user = { username, password };
  }
  return {
    endpoints,
    user,
    namespace: values.namespace,
    cacert: values.cacert ?? env.ETCDCTL_CACERT,
    cert: values.cert ?? env.ETCDCTL_CERT,
    key: values.key ?? env.ETCDCTL_KEY,
    timeout: values.timeout === undefined ? 5_000 : positive(values.timeout, "--timeout"),
  };
}

function positive(text: string, flag: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0)
    throw new UsageError(`${flag} must be a whole number above 0, got "${text}"`);
  return value;
}
