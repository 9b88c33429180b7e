import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { openBackend } from "/work/main/examples/demo/backend.mjs";
import { hotNameEdge } from "/work/main/bench/lib/hot-name.mjs";
import { readFileSync } from "node:fs";
const etcdCpu = (pid) => { const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" "); return (Number(f[11]) + Number(f[12])) * 10; };
const A = await import(process.argv[3] ?? "/work/main/dist/index.js");
const B = await import(pathToFileURL(resolve(process.argv[2], "index.js")).href);
const backend = await openBackend();
const endpoint = backend.endpoints[0];
for (let r = 0; r < 2; r++) for (const [label, sdk] of [["A", A], ["B", B]]) {
  const c0 = process.cpuUsage();
  const e0 = etcdCpu(backend.pid);
  const res = await hotNameEdge({ endpoint, kind: "global", workers: 4, seconds: 4, name: `hr/${label}/${r}/${Date.now()}`, timeout: 10000, holdMs: 1, sdk });
  const n = res.log.latencies.length;
  const c1 = process.cpuUsage(c0);
  const ecpu = (((etcdCpu(backend.pid) - e0) * 1000) / n).toFixed(0);
  const cpu = ((c1.user + c1.system) / n).toFixed(0);
  const per = Object.fromEntries([...res.requests].map(([k, v]) => [k, (v / n).toFixed(2)]));
  console.log(label, "rate", res.rate.toFixed(0), "handoffs", n, "cpu us/handoff", cpu, "etcd us/handoff", ecpu, JSON.stringify(per));
}
await backend.close();
process.exit(0);
