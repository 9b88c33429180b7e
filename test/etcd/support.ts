/// <reference path="./provided.d.ts" />
// Shared helpers for the client-*.test.ts files that run the SDK against real etcd members.
import { randomUUID } from "node:crypto";
import { createServer, type Socket } from "node:net";
import { inject } from "vitest";
import { Etcd, type EtcdOptions, type Fetch, type WatchBatch } from "../../src/index.js";
import { sleep, within } from "../support/async.js";
export { sleep, within };

/** The member started by global-setup, shared by every test file running in parallel. */
export function sharedEndpoint(): string {
  return inject("etcdEndpoint");
}

/** A key prefix no other test uses. */
export function uniquePrefix(label = "t"): string {
  return `${label}-${randomUUID()}/`;
}

/** A client on the shared member (or the given endpoints), with a short default timeout. */
export function client(options: Partial<EtcdOptions> = {}): Etcd {
  return new Etcd({ endpoints: sharedEndpoint(), timeout: 5_000, ...options });
}

/** A fetch that fails the test if the SDK ever calls it: proves validation happens before any request. */
export function forbiddenFetch(): Fetch & { calls: number } {
  const spy = Object.assign(
    async (input: string): Promise<never> => {
      spy.calls++;
      throw new Error(`fetch must not be called, but was called for ${input}`);
    },
    { calls: 0 },
  );
  return spy;
}

export interface RecordedCall {
  url: string;
  /** `http://host:port` the call went to. */
  endpoint: string;
  path: string;
  body: string;
  status?: number;
  /** Set when fetch itself threw (connection refused, reset, aborted). */
  error?: unknown;
}

/** The global fetch, recording each call's path (and status once answered). */
export function recordingFetch(): Fetch & { calls: RecordedCall[]; paths(): string[] } {
  const calls: RecordedCall[] = [];
  const f = async (input: string, init: Parameters<Fetch>[1]) => {
    const url = new URL(input);
    const call: RecordedCall = { url: input, endpoint: url.origin, path: url.pathname, body: init.body };
    calls.push(call);
    try {
      const response = await globalThis.fetch(input, init);
      call.status = response.status;
      return response;
    } catch (error) {
      call.error = error;
      throw error;
    }
  };
  return Object.assign(f, { calls, paths: () => calls.map((c) => c.path) });
}

/** Retries `attempt` until it stops throwing, for at most `timeoutMs`. */
export async function eventually<T>(what: string, timeoutMs: number, attempt: () => Promise<T>, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`${what} did not succeed within ${timeoutMs} ms: ${String(err)}`);
      await sleep(everyMs);
    }
  }
}

/**
 * Pulls batches from a watch until `until(batches)` is true; throws if that takes longer than `ms`.
 * Leaves the iterator open (the caller decides when to stop it).
 */
export async function pull(
  iterator: AsyncIterator<WatchBatch>,
  until: (batches: WatchBatch[]) => boolean,
  ms: number,
  into: WatchBatch[] = [],
): Promise<WatchBatch[]> {
  const deadline = Date.now() + ms;
  while (!until(into)) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`watch: condition not met within ${ms} ms; got ${describeBatches(into)}`);
    const next = await within(left, `watch (got ${describeBatches(into)})`, iterator.next());
    if (next.done) throw new Error(`watch ended early; got ${describeBatches(into)}`);
    into.push(next.value);
  }
  return into;
}

export function describeBatches(batches: WatchBatch[]): string {
  return JSON.stringify(
    batches.map((b) => b.events.map((e) => `${e.type}:${e.kv.key}@${e.kv.modRevision}`)),
  );
}

/** Every event of the batches, flattened. */
export function events(batches: WatchBatch[]) {
  return batches.flatMap((b) => b.events);
}

/** A TCP server that accepts connections and never answers: a hung member. */
export async function silentServer(): Promise<{ url: string; connections(): number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    socket.once("close", () => sockets.delete(socket));
    // Read and discard the request, answer nothing.
    socket.resume();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  return {
    url: `http://127.0.0.1:${address.port}`,
    connections: () => sockets.size,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A loopback port with nothing listening (connections are refused). */
export async function closedPortUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${address.port}`;
}

export const bytes = (...values: number[]) => new Uint8Array(values);
