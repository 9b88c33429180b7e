// What one request costs the client process with each HTTP client, apart from any SDK: the same small read
// (a range of one missing key) sent in a loop through the global fetch, through etcd-edge/node's fetch, and
// as a gRPC call through etcd3, against the same etcd, interleaved in rounds. Where many workers share two
// cores with etcd, this per-request CPU, not the SDK's own, sets how many lock cycles a client sustains.
import { Etcd3 } from "etcd3";
import { openFetch } from "./fetches.mjs";
import { b64, SDK_HEADERS } from "./raw-lock.mjs";
import { interleaved, numbersOf } from "./rounds.mjs";
import { summarize } from "./stats.mjs";

/** µs of process CPU per request for each client: name → { median, min, max, n }. */
export async function cpuPerRequest(endpoint, { rounds = 5, requests = 500 } = {}) {
  const body = JSON.stringify({ key: b64("bench/request-cpu/missing") });
  const init = { method: "POST", headers: SDK_HEADERS, body };
  const global = openFetch("global");
  const node = openFetch("node");
  const grpc = new Etcd3({ hosts: endpoint });
  const gateway = (send) => async () => {
    const response = await send(`${endpoint}/v3/kv/range`, init);
    await response.text();
  };
  const contenders = [
    { name: "global fetch", send: gateway(global.send) },
    { name: "etcd-edge/node", send: gateway(node.send) },
    { name: "etcd3 (gRPC)", send: () => grpc.get("bench/request-cpu/missing").string() },
  ];
  try {
    const results = await interleaved(contenders, rounds, async (c) => {
      const start = process.cpuUsage();
      for (let i = 0; i < requests; i++) await c.send();
      const used = process.cpuUsage(start);
      return (used.user + used.system) / requests;
    });
    return Object.fromEntries(contenders.map((c) => [c.name, summarize(numbersOf(results.get(c.name)).values)]));
  } finally {
    grpc.close();
    await node.close();
  }
}
