// §6 What the client itself costs, with no network: CPU per session lock+unlock and per warm one-shot
// withLock against a stub fetch answering with canned gateway bodies (public API only), the cold import
// of the main entry, and the bundle sizes against their budgets.
import { Etcd } from "etcd-edge";
import { bundleSizes, sizeLine } from "../../scripts/size.mjs";
import { coldImportMs } from "../lib/cold-import.mjs";
import { fmt, summarize, withSpread } from "../lib/stats.mjs";
import { meets } from "../lib/summary.mjs";
import { stubGateway } from "../lib/stub-gateway.mjs";

const NAME = "bench/cpu";

export async function clientCost({ options, summary }) {
  console.log("6. the client alone: CPU against an instant stub fetch, cold import, bundle sizes");
  const perRound = Math.max(1, Math.floor(options.cpuCycles / options.rounds));

  const stub = stubGateway({ name: NAME });
  const etcd = new Etcd({ endpoints: ["http://stub.invalid:2379"], fetch: stub.fetch });
  const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
  const mutex = session.mutex(NAME);
  const lockCycle = async () => (await mutex.lock()).unlock();
  const lock = await cpuPerCycle(lockCycle, perRound, options.rounds);
  await session.close().catch(() => {});

  // The same cycle with an onEvent handler that does nothing: what events cost when someone listens. Unset,
  // no event object is built (the row above).
  const observed = new Etcd({
    endpoints: ["http://stub.invalid:2379"],
    fetch: stubGateway({ name: NAME }).fetch,
    onEvent: () => {},
  });
  const observedSession = await observed.session({ ttl: 30, keepAlive: "manual" });
  const observedMutex = observedSession.mutex(NAME);
  const withEvents = await cpuPerCycle(async () => (await observedMutex.lock()).unlock(), perRound, options.rounds);
  await observedSession.close().catch(() => {});

  // The same cycle with etcd-edge/otel on, recording into the OpenTelemetry SDK (spans made and dropped, no
  // exporter; metrics kept in memory) under the AsyncLocalStorage context manager: what tracing costs.
  const otel = await otelCost(perRound, options.rounds);

  // The stub's own share: the same two answers, fetched and read, with no client around them.
  const bare = await cpuPerCycle(
    async () => {
      await (await stub.fetch("http://stub.invalid:2379/v3/kv/txn", { body: '"request_put"' })).text();
      await (await stub.fetch("http://stub.invalid:2379/v3/kv/txn", { body: "" })).text();
    },
    perRound,
    options.rounds,
  );

  // A module-scope client reused across "invocations", as a warm Lambda does; default lease mode.
  const warmStub = stubGateway({ name: NAME });
  const warm = new Etcd({ endpoints: ["http://stub.invalid:2379"], fetch: warmStub.fetch });
  let withLock;
  let requests;
  try {
    await warm.withLock(NAME, () => {});
    const before = warmStub.requests();
    withLock = await cpuPerCycle(() => warm.withLock(NAME, () => {}), perRound, options.rounds);
    requests = (warmStub.requests() - before) / (perRound * (options.rounds + 2));
  } catch (error) {
    console.log(`   warm withLock against the stub failed: ${error.code ?? ""} ${error.message}`);
  }
  await warm.close?.();

  console.log(
    `   client CPU per session lock+unlock: ${withSpread(lock, 1)} µs ` +
      `(the stub's own share: ${fmt(bare.median, 1)} µs)`,
  );
  console.log(`   the same with onEvent set (no-op):  ${withSpread(withEvents, 1)} µs; unset builds no event`);
  console.log(
    `   the same with etcd-edge/otel on:    ${withSpread(otel, 1)} µs ` +
      `(${fmt(otel.median / lock.median, 2)}x); no subscriber builds no context`,
  );
  if (withLock) {
    console.log(
      `   client CPU per warm withLock:       ${withSpread(withLock, 1)} µs, ${fmt(requests, 2)} requests each`,
    );
  }
  summary.add(
    6,
    "client CPU per lock+unlock, stub fetch",
    `${fmt(lock.median, 1)} µs`,
    "≤ 15 µs",
    meets(lock.median, "<=", 15),
  );

  const cold = coldImportMs(options.importRuns);
  console.log(
    `   cold import of etcd-edge: ${withSpread(cold, 1)} ms (median of ${options.importRuns} fresh processes)`,
  );
  summary.add(6, "cold import of the main entry", `${fmt(cold.median, 1)} ms`, "≤ 10 ms", meets(cold.median, "<=", 10));

  console.log("   bundle sizes (minified, dependencies included, gzip -9):");
  const sizes = await bundleSizes();
  for (const row of sizes) console.log(`     ${sizeLine(row)}`);
  const main = sizes.find((row) => row.name === "etcd-edge");
  summary.add(6, "main entry size, gzipped", `${main.gzipped} B`, `≤ ${main.budget} B (budget)`, main.ok);
  console.log("");
}

/** CPU per session lock+unlock while etcd-edge/otel records into the OpenTelemetry SDK. */
async function otelCost(cycles, rounds) {
  const [{ instrument }, { context }, { AsyncLocalStorageContextManager }, { TracerProvider }, { MeterProvider }] =
    await Promise.all([
      import("etcd-edge/otel"),
      import("@opentelemetry/api"),
      import("@opentelemetry/context-async-hooks"),
      import("@opentelemetry/sdk-trace"),
      import("@opentelemetry/sdk-metrics"),
    ]);
  const manager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(manager);
  const tracerProvider = new TracerProvider();
  const meterProvider = new MeterProvider();
  const handle = instrument({ tracerProvider, meterProvider });
  // A longer lease than the other rows': tracing makes the cycles slower, and the lease is never renewed. The
  // stub grants the TTL it was made with, whatever the session asks: the session believes what was granted.
  const ttl = 600;
  const etcd = new Etcd({ endpoints: ["http://stub.invalid:2379"], fetch: stubGateway({ name: NAME, ttl }).fetch });
  const session = await etcd.session({ ttl, keepAlive: "manual" });
  const mutex = session.mutex(NAME);
  try {
    return await cpuPerCycle(async () => (await mutex.lock()).unlock(), cycles, rounds);
  } finally {
    handle.disable();
    await session.close().catch(() => {});
    context.disable();
  }
}

/**
 * Process CPU (user + system, so GC and compiler threads count too) per cycle, in µs: `rounds` rounds of
 * `cycles` after a warm-up of two rounds (V8 compiles the hot path and grows its young generation over the
 * first tens of thousands of cycles, promoting much of what it copies meanwhile); median and min–max over
 * the rounds.
 */
async function cpuPerCycle(cycle, cycles, rounds) {
  const values = [];
  for (let round = -2; round < rounds; round++) {
    const start = process.cpuUsage();
    for (let i = 0; i < cycles; i++) await cycle();
    const used = process.cpuUsage(start);
    if (round >= 0) values.push((used.user + used.system) / cycles);
  }
  return summarize(values);
}
