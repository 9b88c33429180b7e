// What a tool subscribed to etcd-edge's channels sees, in whatever runtime runs this: it subscribes through
// the runtime's own diagnostics_channel (never importing the SDK for it), then against etcd: locks, fails a
// try on the held lock, unlocks and runs withLock; takes and releases each other recipe once (election,
// semaphore, read and write lock, lockAll); loses a session whose lease is revoked from outside, with its lock;
// and follows a watch through `cutting`, a relay that breaks every stream soon after etcd answers it. It reports
// the events each channel published for those calls.
import { Etcd } from "etcd-edge";

const TRACED = ["lock", "release", "request", "withLock"];
const POINTS = ["lock.lost", "session.lost", "watch.reconnect"];
const EVENTS = ["start", "end", "asyncStart", "asyncEnd", "error"];

export async function observe({ endpoint, runtime, prefix, cutting }) {
  const dc = globalThis.process?.getBuiltinModule?.("node:diagnostics_channel");
  if (dc === undefined) throw new Error("this runtime offers no diagnostics_channel");
  const seen = [];
  const points = [];
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
  let reconnected;
  const heard = new Promise((resolve) => {
    reconnected = resolve;
  });
  for (const channel of POINTS) {
    const handler = ({ kind, name, token, code, endpoint }) => {
      points.push({ channel, kind, name, token, code, endpoint });
      if (channel === "watch.reconnect") reconnected();
    };
    dc.subscribe(`etcd-edge:${channel}`, handler);
    undo.push(() => dc.unsubscribe(`etcd-edge:${channel}`, handler));
  }
  const etcd = new Etcd({ endpoints: endpoint, timeout: 10_000 });
  const name = `${prefix}lock`;
  const sessions = [await etcd.session({ ttl: 10 }), await etcd.session({ ttl: 10 })];
  const [holder, other] = sessions;
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
      recipes: await eachRecipe(holder, `${prefix}recipe/`, ended),
      lost: await loseSession(etcd, sessions, `${prefix}lost`),
      reconnect: await cutWatch(cutting, `${prefix}watched`, heard),
      points,
    };
  } finally {
    await Promise.all(sessions.map((session) => session.close().catch(() => {})));
    for (const step of undo) step();
  }
}

/** Each recipe taken and released once: what its acquisition and its release published at their end. */
async function eachRecipe(session, base, ended) {
  const taken = [];
  const election = session.election(`${base}election`);
  await election.campaign("me");
  taken.push([`${base}election`, election.revision]);
  await election.resign();
  const permit = await session.semaphore(`${base}semaphore`, { permits: 2 }).acquire();
  taken.push([`${base}semaphore`, permit.revision]);
  await permit.release();
  const reader = await session.rwlock(`${base}rw`).readLock();
  await reader.unlock();
  const writer = await session.rwlock(`${base}rw`).writeLock();
  await writer.unlock();
  taken.push([`${base}rw`, reader.revision, writer.revision]);
  const both = await session.lockAll([`${base}a`, `${base}b`]);
  taken.push([`${base}a, ${base}b`, both.revision]);
  await both.unlock();
  return taken.map(([lockName, ...tokens]) => ({
    name: lockName,
    tokens,
    acquired: ended("lock", lockName).map(({ kind, token, outcome }) => ({ kind, token, outcome })),
    released: ended("release", lockName).map(({ kind, token, outcome }) => ({ kind, token, outcome })),
  }));
}

/** A lock held by a session with manual renewal, whose lease is revoked from outside: the renewal finds it. */
async function loseSession(etcd, sessions, lockName) {
  const session = await etcd.session({ ttl: 10, keepAlive: "manual" });
  sessions.push(session);
  const lock = await session.mutex(lockName).lock();
  await etcd.lease.revoke(session.leaseId);
  const renewal = await session.renew().then(
    () => "renewed",
    (error) => error.code,
  );
  return { renewal, token: lock.revision, held: lock.held };
}

/** A watch through a relay that cuts each stream once etcd has answered it: reopened, and published as such. */
async function cutWatch(cutting, key, heard) {
  const etcd = new Etcd({ endpoints: cutting, timeout: 10_000 });
  const stop = new AbortController();
  const watching = (async () => {
    for await (const _ of etcd.watch({ key, signal: stop.signal }));
  })().catch((error) => (stop.signal.aborted ? undefined : error));
  let timer;
  const bound = new Promise((resolve) => {
    timer = setTimeout(resolve, 10_000, "no watch.reconnect within 10 s");
  });
  const outcome = await Promise.race([heard.then(() => "published"), bound]);
  clearTimeout(timer);
  stop.abort();
  const failed = await watching;
  await etcd.close();
  return failed === undefined ? outcome : `the watch failed: ${failed.code ?? failed}`;
}
