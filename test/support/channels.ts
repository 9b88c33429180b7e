// A raw diagnostics_channel subscriber for etcd-edge's channels, as a tool that does not import the SDK would
// be: every event of every channel, in order, each with a snapshot of its message (errors spelled out, causes
// included) taken when it was published.
import dc from "node:diagnostics_channel";

export const TRACED = ["request", "lock", "release", "withLock"] as const;
export const POINTS = ["lock.lost", "lock.released", "session.lost", "watch.reconnect"] as const;
const EVENTS = ["start", "end", "asyncStart", "asyncEnd", "error"] as const;

export interface Seen {
  /** `lock:start`, `release:asyncEnd`, `lock.lost`, ... */
  event: string;
  /** The message as it was when published (a context object changes between its events). */
  message: Record<string, unknown>;
  /** Every string in the message, errors' messages, stacks and causes included. */
  text: string;
}

export interface ChannelLog {
  seen: Seen[];
  /** The events of one channel, as `<event>` names, in order; optionally only those whose message matches. */
  events(channel: string, where?: (message: Record<string, unknown>) => boolean): string[];
  stop(): void;
}

/** Subscribes to every etcd-edge channel until `stop()`. */
export function logChannels(): ChannelLog {
  const seen: Seen[] = [];
  const undo: Array<() => void> = [];
  const record = (event: string) => (message: unknown) => {
    seen.push({ event, message: snapshot(message) as Record<string, unknown>, text: spell(message) });
  };
  for (const name of TRACED) {
    const channel = dc.tracingChannel(`etcd-edge:${name}`);
    const handlers = Object.fromEntries(EVENTS.map((event) => [event, record(`${name}:${event}`)]));
    channel.subscribe(handlers as never);
    undo.push(() => channel.unsubscribe(handlers as never));
  }
  for (const name of POINTS) {
    const listener = record(name);
    dc.subscribe(`etcd-edge:${name}`, listener);
    undo.push(() => dc.unsubscribe(`etcd-edge:${name}`, listener));
  }
  return {
    seen,
    events: (channel, where = () => true) =>
      seen
        .filter((s) => s.event.startsWith(`${channel}:`) && where(s.message))
        .map((s) => s.event.slice(channel.length + 1)),
    stop: () => {
      for (const step of undo.splice(0)) step();
    },
  };
}

function snapshot(value: unknown): unknown {
  if (value instanceof Error)
    return { name: value.name, message: value.message, code: (value as { code?: unknown }).code };
  if (typeof value !== "object" || value === null) return value;
  return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, snapshot(inner)]));
}

/** Every string reachable from `value`: own properties (enumerable or not), error messages, stacks and causes. */
export function spell(value: unknown, seen = new Set<unknown>(), depth = 0): string {
  if (value === null || value === undefined || depth > 8) return "";
  if (typeof value !== "object" && typeof value !== "function") return String(value);
  if (seen.has(value)) return "";
  seen.add(value);
  const parts: string[] = [];
  for (const key of Reflect.ownKeys(value)) {
    const inner = (value as Record<PropertyKey, unknown>)[key];
    parts.push(String(key), spell(inner, seen, depth + 1));
  }
  // What JSON.stringify would show (a lock's toJSON() is its ticket, secret included).
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === "function") parts.push(spell(toJSON.call(value), seen, depth + 1));
  if (value instanceof Error) parts.push(value.message, value.stack ?? "", spell(value.cause, seen, depth + 1));
  return parts.join(" ");
}
