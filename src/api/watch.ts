import { optionalCount } from "./args.js";
import { decodeHeader, decodeKeyValue, int, type KeyValue, type ResponseHeader } from "./codec.js";
import { aborted, badResponse, compacted, streamHeldBack, unavailable } from "../errors/catalogue.js";
import { EtcdCompactedError, EtcdError, EtcdServerError } from "../errors/etcd-error.js";
import { publishWatchReconnect } from "../events/channels.js";
import type { KeyRange, Keyspace } from "./keyspace.js";
import { lines } from "../gateway/ndjson.js";
import { backoff } from "../gateway/retry-policy.js";
import { backgroundTimer, delay } from "../gateway/signals.js";
import { errorFromStreamLine, isProxyUnavailable, parseJson, statusError } from "../gateway/status.js";
import type { CallOptions, OpenStream, Transport } from "../gateway/transport.js";
import { watchResponse, type WireWatchResponse } from "../gateway/wire.js";
import { acceptsWatch } from "../gateway/wire-accept.js";
import { graceOf, resolveIdleTimeout, WatchStream } from "./watch-stream.js";

export interface WatchOptions extends CallOptions {
  /** Deliver history from this revision on (0 or absent: only changes from now). */
  startRevision?: number | undefined;
  /** Include each key's previous value in its events. */
  prevKv?: boolean | undefined;
  /** Leave out put events. */
  noPut?: boolean | undefined;
  /** Leave out delete events. */
  noDelete?: boolean | undefined;
  /** Ask the server for periodic progress notifications (batches with no events). */
  progressNotify?: boolean | undefined;
  /** Consecutive failed reconnections before the watch gives up with the last error. Default 10. */
  retries?: number | undefined;
  /**
   * How long, in milliseconds, one stream of the watch lives. The server is asked (Grpc-Timeout) to end each
   * stream this long after it opened, busy or quiet, and the watch goes on, without loss, on a stream opened
   * shortly before; so a healthy stream always speaks within this time, and one silent a second longer is a
   * dead connection, reopened on another endpoint. Default 30 000; at most 2 147 483 647 (about 24.8 days).
   */
  idleTimeout?: number | undefined;
  /** @internal Told the revision the server reports, and the endpoint, each time the watch is created. */
  onCreated?: ((revision: number, endpoint: string) => void) | undefined;
  /** @internal Open the stream on another endpoint than this one when there is one (a second watch). */
  avoid?: string | undefined;
  /** @internal Opened by the client on its own (a holding following its keys): no caller's span traces it. */
  background?: boolean | undefined;
}

/** What `watch()` takes: the keys to follow (a key, a range or a prefix) and {@link WatchOptions}. */
export type WatchQuery = KeyRange & WatchOptions;

/** One change to one key. */
export interface WatchEvent {
  /** `"put"` for a write (creation or update), `"delete"` for a deletion (also by lease expiry). */
  type: "put" | "delete";
  /** The key after the event; for a delete, only the key and the deletion's revision (`modRevision`). */
  kv: KeyValue;
  /** The key before the event, when asked for with `prevKv`. */
  prevKv?: KeyValue | undefined;
}

/** All events of one revision (or a progress notification, with no events). */
export interface WatchBatch {
  /**
   * `header.revision` is the store's revision when etcd sent the message, never below the events' own
   * (`kv.modRevision`); after a progress notification, every change up to it has been delivered.
   */
  header: ResponseHeader;
  /** The changes of that revision, in the order etcd applied them; empty for a progress notification. */
  events: WatchEvent[];
}

const DEFAULT_RETRIES = 10;
const DEFAULT_IDLE_TIMEOUT = 30_000;

/**
 * How long the first stream of a watch lives, at most. etcd sends `created` as soon as a watch opens; a proxy or
 * load balancer that holds streamed answers back until they are complete (nginx's default buffering, say) lets
 * it through only when the stream ends. A short first stream ends soon, so the watch tells that within a second
 * (STREAM_HELD_BACK) instead of going silent; later streams live `idleTimeout`.
 */
export const FIRST_STREAM_MS = 1_000;

/** Messages that arrive this close together came in one burst. */
const HELD_TOGETHER_MS = 100;

/**
 * Follows changes as an async iterable. A broken or silent stream is reopened from the revision after the
 * last one delivered, and a stream the server ends at its age (`idleTimeout`) is followed by one opened from
 * there a little earlier, so nothing is lost or repeated; history removed by compaction ends it with
 * COMPACTED. Aborting `signal` or leaving the loop closes the connection.
 */
export async function* watch(
  transport: Transport,
  keyspace: Keyspace,
  query: WatchQuery,
): AsyncGenerator<WatchBatch, void, undefined> {
  const retries = optionalCount(query.retries, "retries") ?? DEFAULT_RETRIES;
  const idle = resolveIdleTimeout(query.idleTimeout) ?? DEFAULT_IDLE_TIMEOUT;
  const request = createRequest(keyspace, query);
  const outer = query.signal;
  /** The first revision not yet delivered. */
  let next = optionalCount(query.startRevision, "startRevision") || undefined;
  /**
   * Reopens in a row that proved nothing. A stream proves itself by delivering events or by living its
   * whole idle period; one that is created and then dies at once does not, so a server that answers
   * `created` and hangs up cannot keep the watch reconnecting forever.
   */
  let failures = 0;

  /**
   * The stream that takes over when the current one reaches the end the server was asked for: opened a little
   * before it (see renewAhead), so that it is created and caught up by then.
   */
  let successor: Opening | undefined;
  /** Hands the successor over, leaving none. */
  const takeSuccessor = (): Opening | undefined => {
    const taken = successor;
    successor = undefined;
    return taken;
  };
  /** A renewal (a successor, a reopening) is the watch's own doing, traced as background like its renewals. */
  // A renewal starts after the last revision delivered, except with progress notifications: etcd 3.6 and later
  // send none to a watcher that starts in the future, as that one does while nothing changes, so it starts at the
  // last one delivered, and what that replays is left out below.
  const open = (
    avoid: string | undefined,
    background = true,
    life = idle,
    start = next && request.progress_notify ? next - 1 : next,
  ): Opening => {
    const stream = new WatchStream(outer, life);
    stream.follow();
    const body = { create_request: { ...request, start_revision: start === undefined ? undefined : String(start) } };
    const opened = transport.open("/v3/watch", body, stream.signal, {
      timeout: query.timeout,
      headers: WatchStream.serverTimeout(life),
      avoid,
      background,
    });
    opened.catch(() => {});
    return { stream, opened };
  };

  try {
    for (let first = true; ; first = false) {
      if (outer?.aborted) throw aborted(outer.reason);
      const renewed = takeSuccessor();
      // Only the first opening avoids an endpoint: a reopened stream goes wherever the client's endpoints now point.
      const { stream, opened: opening } =
        renewed ??
        (first ? open(query.avoid, query.background === true, Math.min(idle, FIRST_STREAM_MS), next) : open(undefined));
      let endpoint: string | undefined;
      let proved = false;
      /** When its first message came, in milliseconds of its age. */
      let firstAt: number | undefined;
      /** Why the stream ended; undefined when the server ended it at the time asked for. */
      let ended: EtcdError | undefined;
      /** The server's end came, when it was asked for (the body's own end follows). */
      let end = false;
      let renewal: ReturnType<typeof setTimeout> | undefined;
      try {
        const opened = await opening;
        endpoint = opened.endpoint;
        stream.heard();
        // From the revision not yet delivered when it opens: what this stream delivers after that comes twice
        // and is left out below.
        const ahead = renewAhead(stream.life);
        renewal = backgroundTimer(
          () => {
            if (next === undefined) return;
            successor = open(undefined);
            // A server that does not end the stream when asked (a proxy that drops Grpc-Timeout) would leave the
            // successor idle for good: past half the grace, the successor takes over anyway. Half: the watchdog
            // allows the whole grace since the last message, and a late end (a loaded proxy) must not find the
            // two tied and be taken for a dead connection, reopened as broken.
            renewal = backgroundTimer(() => stream.retire(), ahead + graceOf(stream.life) / 2);
          },
          stream.life - ahead - stream.age,
        );
        for await (const line of lines(opened.body, transport.config.maxResponseBytes)) {
          const silence = stream.heard();
          firstAt ??= stream.age;
          const response = parseLine(line, opened.endpoint);
          if (response === undefined) {
            // Held back whole: its first message came at the end of its life, and its end right behind the message
            // before it (`silence`, measured on the stream, not across the consumer's pauses). etcd's own first
            // message comes a round trip after the request, and its end only at the time asked for.
            if (firstAt >= 0.75 * stream.life && silence < HELD_TOGETHER_MS) {
              transport.streamHeldBack(opened.endpoint);
              throw streamHeldBack(opened.endpoint, firstAt);
            }
            // The end the server was asked for. The body's own end follows it at once: read on to it, and the
            // connection serves the next request; dropped before it, the connection goes too, and through a TLS
            // proxy the next stream pays a handshake. A body that does not end is dropped when the successor
            // takes over (or by the watchdog), as a stream whose server never ends it.
            end = true;
            continue;
          }
          // A refused watch answers `created` and `canceled` in one message: the cancellation wins.
          if (response.canceled) {
            const error = cancelError(response, opened.endpoint);
            // A renewal refused for compaction, taking over from a stream that lived through the compaction and
            // ended at its deadline: see `compactedRenewal`.
            if (renewed !== undefined && error instanceof EtcdCompactedError && compactedRenewal(error, next)) {
              next = Math.max(next ?? 0, error.compactRevision ?? 0);
              throw new Resume();
            }
            if (error.code === "UNAUTHENTICATED" && opened.token !== undefined) {
              // The token expired: forget it and reopen, which authenticates again.
              transport.tokenRejected(opened.token);
              throw new Reopen(error);
            }
            throw error;
          }
          if (response.created) {
            const revision = int(response.header?.revision, "revision");
            next ??= revision + 1;
            query.onCreated?.(revision, opened.endpoint);
            continue;
          }
          const header = decodeHeader(response.header);
          const events = (response.events ?? [])
            .map((event) => ({
              type: event.type === "DELETE" || event.type === 1 ? ("delete" as const) : ("put" as const),
              kv: decodeKeyValue(keyspace, event.kv ?? {}),
              ...(event.prev_kv === undefined ? {} : { prevKv: decodeKeyValue(keyspace, event.prev_kv) }),
            }))
            // After a reconnection (or a renewal) the server may resend what was delivered already.
            .filter((event) => next === undefined || event.kv.modRevision >= next);
          proved = true;
          stream.pause();
          if (events.length > 0) {
            // Replayed history packs several revisions into one message; deliver one revision per batch.
            for (const batch of byRevision(events)) {
              next = batch[0]!.kv.modRevision + 1;
              yield { header, events: batch };
            }
          } else if (response.events === undefined || response.events.length === 0) {
            // A progress notification: everything up to header.revision has been sent.
            next = Math.max(next ?? 0, header.revision + 1);
            yield { header, events: [] };
          }
          stream.heard();
        }
        if (!end) ended = unavailable(`watch stream from ${endpoint} ended`, { endpoint });
      } catch (thrown) {
        if (outer?.aborted) throw aborted(outer.reason);
        if (end || stream.retired || thrown instanceof Resume) {
          // A clean end (`ended` stays undefined): the server's, with the rest of its body failing after it (a proxy
          // that resets it), or the successor's takeover.
        } else if (stream.silent) {
          ended = unavailable(`watch stream from ${endpoint ?? "etcd"} went silent for ${idle} ms`, { endpoint });
          if (endpoint !== undefined) transport.endpointFailed(endpoint);
        } else {
          ended = thrown instanceof Reopen ? thrown.error : toError(thrown);
          if (!(thrown instanceof Reopen) && !reconnectable(ended)) throw ended;
        }
      } finally {
        clearTimeout(renewal);
        stream.close();
      }
      if (proved || stream.age >= idle) failures = 0;
      if (ended === undefined) continue;
      // A broken stream may have taken its successor's connection or member with it: reopen as for any break.
      takeSuccessor()?.stream.close();
      if (++failures > retries) throw ended;
      if (transport.events.on)
        transport.events.emit({ type: "watch.reconnected", endpoint, code: ended.code, revision: next });
      publishWatchReconnect(endpoint, ended.code, next);
      await delay(backoff(failures, 50, 2_000), outer);
    }
  } finally {
    takeSuccessor()?.stream.close();
  }
}

/** A stream being opened: its life, and the server's answer to the opening. */
interface Opening {
  stream: WatchStream;
  opened: Promise<OpenStream>;
}

/**
 * How long before a stream's end (the server ends every stream `idle` after it opened, however busy) its
 * successor is opened. etcd serves a watch that starts at a past revision from its "unsynced" set, caught up
 * on a sync pass every 100 ms: a stream opened only once the last one ended delivers the changes of its first
 * moments up to 100 ms late, a stall of a hot lock's handoff at every renewal. Opened this much earlier, the
 * successor is caught up before it takes over, and the two overlap for this long at most.
 */
export function renewAhead(idle: number): number {
  return Math.min(500, Math.floor(idle / 4));
}

function createRequest(keyspace: Keyspace, query: WatchQuery): Record<string, unknown> {
  const filters = [...(query.noPut ? ["NOPUT"] : []), ...(query.noDelete ? ["NODELETE"] : [])];
  return {
    ...keyspace.range(query),
    prev_kv: query.prevKv || undefined,
    filters: filters.length > 0 ? filters : undefined,
    progress_notify: query.progressNotify || undefined,
  };
}

/**
 * A message of the stream; undefined for the clean end we asked for with `Grpc-Timeout`: DeadlineExceeded from
 * the server, which the gateway reports as code 4 or, racing with its own stream shutdown, as code 2 with the same
 * text. Any other error line is thrown.
 */
function parseLine(line: string, endpoint: string): WireWatchResponse | undefined {
  const json = parseJson(line) as { result?: unknown; error?: unknown } | undefined;
  if (json === undefined || typeof json !== "object" || json === null) throw badResponse(200, line, endpoint);
  if (json.error !== undefined) {
    const error = errorFromStreamLine(json.error, 200, endpoint);
    if (
      error instanceof EtcdServerError &&
      (error.grpcCode === 4 || error.message.includes("context deadline exceeded"))
    )
      return undefined;
    throw error;
  }
  if (acceptsWatch(json.result)) return json.result as WireWatchResponse;
  const checked = watchResponse.safeParse(json.result);
  if (!checked.success) throw badResponse(200, line, endpoint, "a watch message that does not match the schema");
  return checked.data;
}

function cancelError(response: WireWatchResponse, endpoint: string): EtcdError {
  const compactRevision = int(response.compact_revision, "compact_revision");
  if (compactRevision > 0) {
    return compacted(
      `watch start revision has been compacted; the oldest available revision is ${compactRevision}`,
      compactRevision,
      endpoint,
    );
  }
  return statusError(2, response.cancel_reason ?? "watch canceled by the server", 200, endpoint);
}

/**
 * Whether a renewal's COMPACTED loses nothing. A quiet key's watch resumes each renewal from a revision that
 * never moves without its events, so once etcd compacts past it (Kubernetes does every 5 minutes) every renewal
 * would be refused though nothing was lost. The stream it renews was still open when the renewal was refused,
 * and etcd cancels every watcher still catching up whose start was compacted (its next sync pass, every 100 ms):
 * one that lived on to its deadline after that was caught up, and had delivered every change of the revisions
 * before the compaction, which came before that refusal. So the watch goes on from the compaction's revision.
 */
function compactedRenewal(error: EtcdCompactedError, next: number | undefined): boolean {
  return next !== undefined && error.compactRevision !== undefined;
}

/** Reopens the stream at once, as at its deadline: nothing was lost (see `compactedRenewal`). */
class Resume {}

/** A failure that calls for reopening the stream whatever its code (a token to renew). */
class Reopen {
  constructor(readonly error: EtcdError) {}
}

function* byRevision(events: WatchEvent[]): Generator<WatchEvent[]> {
  let start = 0;
  for (let i = 1; i <= events.length; i++) {
    if (i === events.length || events[i]!.kv.modRevision !== events[start]!.kv.modRevision) {
      yield events.slice(start, i);
      start = i;
    }
  }
}

/** Failures worth reopening the stream for: the connection or the member. */
function reconnectable(error: EtcdError): boolean {
  if (error.code === "UNAVAILABLE" || error.code === "TIMEOUT") return true;
  return isProxyUnavailable(error);
}

function toError(thrown: unknown): EtcdError {
  if (thrown instanceof EtcdError) return thrown;
  return unavailable(`watch stream broke: ${thrown instanceof Error ? thrown.message : String(thrown)}`, {
    cause: thrown,
  });
}
