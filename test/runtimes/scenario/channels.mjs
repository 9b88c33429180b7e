// What a tool subscribed to etcd-edge's channels sees, in whatever runtime runs this: it subscribes through
// the runtime's own diagnostics_channel (never importing the SDK for it), then locks, fails a try on the held
// lock, unlocks and runs withLock against etcd. It reports the events each channel published for those calls.
import { Etcd } from "etcd-edge";

const TRACED = ["lock", "release", "request", "withLock"];
const EVENTS = ["start", "end", "asyncStart", "asyncEnd", "error"];

export async function observe({ endpoint, runtime, prefix }) {
  const dc = globalThis.process?.getBuiltinModule?.("node:diagnostics_channel");
  if (dc === undefined) throw new Error("this runtime offers no diagnostics_channel");
  const seen = [];
  const undo = [];
  for (const channel of TRACED) {
    const tracing = dc.tracingChannel(`etcd-edge:${channel}`);
    const handlers = Object.fromEntries(
      EVENTS.map((event) => [
        event,
        (message) =>
          seen.push({
            channel,
            event,
            name: message.name,
            kind: message.kind,
            token: message.token,
            outcome: message.outcome,
          }),
      ]),
    );
    tracing.subscribe(handlers);
    undo.push(() => tracing.unsubscribe(handlers));
  }
  const etcd = new Etcd({ endpoints: endpoint, timeout: 10_000 });
  const name = `${prefix}lock`;
  const [holder, other] = [await etcd.session({ ttl: 10 }), await etcd.session({ ttl: 10 })];
  try {
    const lock = await holder.mutex(name).lock();
    const refused = (await other.mutex(name).tryLock()) === undefined;
    await lock.unlock();
    await etcd.withLock(`${prefix}with-lock`, () => {});
    const of = (channel, lockName) =>
      seen.filter((s) => s.channel === channel && s.name === lockName).map((s) => s.event);
    const ended = (channel, lockName) =>
      seen.filter((s) => s.channel === channel && s.name === lockName && s.event === "asyncEnd");
    return {
      runtime,
      revision: lock.revision,
      refused,
      lock: of("lock", name),
      acquired: ended("lock", name).map(({ kind, token, outcome }) => ({ kind, token, outcome })),
      release: of("release", name),
      released: ended("release", name).map(({ kind, token, outcome }) => ({ kind, token, outcome })),
      withLock: of("withLock", `${prefix}with-lock`),
      requests: seen.filter((s) => s.channel === "request" && s.event === "asyncEnd").length,
    };
  } finally {
    await Promise.all([holder.close(), other.close()]);
    for (const step of undo) step();
  }
}
