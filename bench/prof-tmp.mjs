import { openBackend } from "/work/main/examples/demo/backend.mjs";
import { hotNameEdge } from "/work/main/bench/lib/hot-name.mjs";
const sdk = await import(process.argv[2]);
const backend = await openBackend();
const res = await hotNameEdge({ endpoint: backend.endpoints[0], kind: "global", workers: 4, seconds: 6, name: `prof/${Date.now()}`, timeout: 10000, holdMs: 1, sdk });
console.log("rate", res.rate.toFixed(0));
await backend.close();
process.exit(0);
