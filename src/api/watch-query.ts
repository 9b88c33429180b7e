import { optionalCount } from "./args.js";
import type { Keyspace } from "./keyspace.js";
import type { WatchQuery } from "./watch.js";
import { resolveFlag, resolveSignal, resolveTimeout } from "../gateway/config.js";
import { resolveIdleTimeout } from "./watch-stream.js";

/**
 * Every option of a watch, checked when `watch()` is called: the iteration starts later (at the first
 * `next()`), and by then a bad option would surface as a TypeError or be sent as something else.
 */
export function checkWatchQuery(keyspace: Keyspace, query: WatchQuery): void {
  keyspace.range(query);
  resolveSignal(query.signal);
  resolveTimeout(query.timeout, "timeout");
  resolveIdleTimeout(query.idleTimeout);
  optionalCount(query.startRevision, "startRevision");
  optionalCount(query.retries, "retries");
  for (const name of ["prevKv", "noPut", "noDelete", "progressNotify"] as const) resolveFlag(query[name], name);
}
