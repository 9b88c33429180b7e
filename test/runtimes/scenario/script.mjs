// The same lock-and-fence scenario for every runtime (Node 22/24, Deno, Bun, workerd). It imports the
// PACKED package by name, so it runs from a temp project where `npm install etcd-edge-<version>.tgz` put
// etcd-edge into node_modules. Only fetch, AbortController, setTimeout and crypto.randomUUID are used here:
// no Node, Deno or Bun API, so the workerd bundle can import it as it is.
import { Etcd, op, VERSION } from "etcd-edge";

/** Longest the whole scenario may take; every await below is bounded by it. */
const DEADLINE_MS = 20_000;

/**
 * Runs the scenario against `endpoint` with keys under `prefix` and resolves with what it observed (one
 * JSON-able object). Throws on any failure; the caller turns that into its own error output.
 */
export async function run({ endpoint, runtime, prefix }) {
  if (!endpoint) throw new Error("no etcd endpoint given");
  if (!prefix) throw new Error("no key prefix given");
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new Error(`scenario not done within ${DEADLINE_MS} ms`)), DEADLINE_MS);
  const signal = deadline.signal;
  const etcd = new Etcd({ endpoints: endpoint.split(","), timeout: 5_000 });
  const lockName = `${prefix}lock`;
  const key = `${prefix}data`;
  const value = `${runtime}:${crypto.randomUUID()}`;
  let session;
  // Ends the watch on success, on failure and at the deadline, so no stream outlives the scenario.
  const watching = new AbortController();
  const stopWatch = () => watching.abort(signal.reason);
  signal.addEventListener("abort", stopWatch, { once: true });
  try {
    session = await etcd.session({ ttl: 5, keepAlive: "manual", signal });
    const lock = await session.mutex(lockName).lock({ signal, timeout: 10_000 });
    const heldWhileLocked = lock.held;

    // The watch starts at the revision right after the lock was taken, so it sees the fenced put whether
    // its stream opens before the write (live event) or after it (history replay).
    const watched = (async () => {
      for await (const batch of etcd.watch({ key, startRevision: lock.header.revision + 1, signal: watching.signal })) {
        const put = batch.events.find((event) => event.type === "put");
        if (put !== undefined) return { value: put.kv.value, modRevision: put.kv.modRevision };
      }
      throw new Error("watch ended without seeing the put");
    })();
    // Observed below; this only keeps an early failure elsewhere from leaving an unhandled rejection.
    watched.catch(() => {});

    const fencedWrite = await etcd.txn().if(lock.ifHeld()).then(op.put(key, value)).commit({ signal });
    const seen = await watched;
    watching.abort();

    await lock.unlock({ signal });
    const lockKeyAfterUnlock = await etcd.get(lock.key, { signal });
    // A stale holder's fenced write must be refused once the lock key is gone.
    const staleWrite = await etcd
      .txn()
      .if(lock.ifHeld())
      .then(op.put(key, `${value}:stale`))
      .commit({ signal });
    const revoked = await session.close({ signal });

    // The same in one call, as the Workers example does: session, lock, fenced write, release and revoke.
    const guarded = await etcd.withLock(
      `${prefix}with-lock`,
      async (held) => {
        const write = await etcd
          .txn()
          .if(held.ifHeld())
          .then(op.put(`${prefix}with-lock-data`, value))
          .commit({ signal });
        return { fenced: write.succeeded, token: held.revision, putRevision: write.header.revision };
      },
      { ttl: 5, keepAlive: "manual", timeout: 10_000, signal },
    );

    const renewal = await renewedWatch(endpoint, `${prefix}renew/`, signal);

    return {
      runtime,
      version: VERSION,
      lockKey: lock.key,
      leaseId: session.leaseId,
      revision: lock.revision,
      heldWhileLocked,
      key,
      value,
      fenced: fencedWrite.succeeded,
      putRevision: fencedWrite.header.revision,
      watched: seen.value,
      watchedRevision: seen.modRevision,
      unlocked: lockKeyAfterUnlock === undefined && !lock.held,
      staleFenced: staleWrite.succeeded,
      closed: revoked && session.closed,
      withLock: guarded,
      renewal,
    };
  } finally {
    clearTimeout(timer);
    signal.removeEventListener("abort", stopWatch);
    watching.abort();
    // On failure, drop the lease so nothing of this run outlives it by more than the request.
    if (session !== undefined && !session.closed) await session.close().catch(() => {});
  }
}

/**
 * A watch renewed while writes go on: etcd ends each stream at `idleTimeout` (300 ms here) however busy, and the
 * SDK's successor, opened a little earlier from a timer, takes over (in workerd, within the request that
 * watches). Reports the revisions written and those the watch delivered, how many streams the server ended, and
 * how many of those had their successor sent before the end (in order of occurrence: workerd's clock stands
 * still while a request runs).
 */
async function renewedWatch(endpoint, prefix, signal) {
  const log = [];
  const counting = async (url, init) => {
    if (!url.endsWith("/v3/watch")) return fetch(url, init);
    const stream = log.filter((entry) => entry.startsWith("sent ")).length;
    log.push(`sent ${stream}`);
    const response = await fetch(url, init);
    if (response.body === null) return response;
    const decoder = new TextDecoder();
    const ends = new TransformStream({
      transform(chunk, controller) {
        if (decoder.decode(chunk, { stream: true }).includes('"error"')) log.push(`end ${stream}`);
        controller.enqueue(chunk);
      },
    });
    return new Response(response.body.pipeThrough(ends), { status: response.status, headers: response.headers });
  };
  const etcd = new Etcd({ endpoints: endpoint.split(","), timeout: 5_000, fetch: counting });
  const count = 24;
  const { header } = await etcd.range({ prefix, countOnly: true, signal });
  const done = new AbortController();
  const stop = () => done.abort(signal.reason);
  signal.addEventListener("abort", stop, { once: true });
  try {
    const delivered = (async () => {
      const revisions = [];
      const query = { prefix, startRevision: header.revision + 1, idleTimeout: 300, signal: done.signal };
      for await (const batch of etcd.watch(query)) {
        for (const event of batch.events) revisions.push(event.kv.modRevision);
        if (revisions.length >= count) return revisions;
      }
      return revisions;
    })();
    delivered.catch(() => {});
    const written = [];
    // About 1 s of writes: three renewals or more.
    for (let i = 0; i < count; i++) {
      written.push((await etcd.put(`${prefix}${i}`, String(i), { signal })).header.revision);
      await new Promise((resolve) => setTimeout(resolve, 40));
    }
    const watched = await delivered;
    const ended = log.filter((entry) => entry.startsWith("end ")).map((entry) => Number(entry.slice(4)));
    const handedOver = ended.filter(
      (k) => log.indexOf(`sent ${k + 1}`) >= 0 && log.indexOf(`sent ${k + 1}`) < log.indexOf(`end ${k}`),
    );
    return { written, delivered: watched, ended: ended.length, handedOver: handedOver.length };
  } finally {
    signal.removeEventListener("abort", stop);
    done.abort();
  }
}

/** The one line a runtime prints: the observation, or `{ runtime, error }`. */
export function errorReport(runtime, error) {
  return {
    runtime,
    error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
    code: error?.code,
    stack: error instanceof Error ? error.stack : undefined,
  };
}
