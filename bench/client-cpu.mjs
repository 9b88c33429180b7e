// What the client itself costs, without a network: cold import time of the main entry, CPU per lock+unlock
// cycle against a stub fetch that answers instantly, and the share of that spent validating responses.
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { Etcd } from "etcd-edge";

// The wire checks are internal: bundle them from source to time them on their own.
const wire = await build({ entryPoints: [fileURLToPath(new URL("../src/gateway/wire.ts", import.meta.url))], bundle: true, format: "esm", write: false });
const { txnResponse } = await import(`data:text/javascript,${encodeURIComponent(wire.outputFiles[0].text)}`);

const entry = fileURLToPath(import.meta.resolve("etcd-edge"));

export function coldImportMs(runs = 7) {
  const times = [];
  for (let i = 0; i < runs; i++) {
    const out = execFileSync(process.execPath, [
      "--input-type=module",
      "-e",
      `const t = performance.now(); await import(${JSON.stringify(entry)}); console.log(performance.now() - t);`,
    ]);
    times.push(Number(out.toString()));
  }
  return times.sort((a, b) => a - b)[Math.floor(runs / 2)];
}

const header = '"header":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437","revision":"42","raft_term":"2"}';
const kv = '{"key":"YmVuY2gvYS82OTM0","create_revision":"42","mod_revision":"42","version":"1","lease":"7587899071857085703"}';
const LOCK = `{${header},"succeeded":true,"responses":[{"response_put":{"header":{"revision":"42"}}},{"response_range":{"header":{"revision":"42"},"kvs":[${kv}],"count":"1"}},{"response_range":{"header":{"revision":"42"},"kvs":[${kv}],"count":"1"}}]}`;
const UNLOCK = `{${header},"succeeded":true,"responses":[{"response_delete_range":{"header":{"revision":"43"},"deleted":"1"}}]}`;
const GRANT = `{${header},"ID":"7587899071857085703","TTL":"30"}`;

/** Microseconds of client CPU per lock+unlock cycle (two requests), and per validation of a lock response. */
export async function cycleCpu(cycles = 20_000) {
  let n = 0;
  const fetch = async (url) => {
    const body = url.endsWith("/grant") ? GRANT : n++ % 2 === 0 ? LOCK : UNLOCK;
    return { status: 200, body: null, text: async () => body };
  };
  const etcd = new Etcd({ endpoints: ["http://stub:2379"], fetch });
  const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
  const mutex = session.mutex("bench/a");
  for (let i = 0; i < 2_000; i++) await (await mutex.lock()).unlock();
  let start = performance.now();
  for (let i = 0; i < cycles; i++) await (await mutex.lock()).unlock();
  const cycle = ((performance.now() - start) / cycles) * 1000;
  const parsed = JSON.parse(LOCK);
  start = performance.now();
  for (let i = 0; i < cycles; i++) txnResponse.safeParse(parsed);
  const validation = ((performance.now() - start) / cycles) * 1000;
  await session.close().catch(() => {});
  return { cycle, validation };
}
