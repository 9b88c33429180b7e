import { Etcd, op } from "/work/main/dist/index.js";
import { openBackend } from "/work/main/examples/demo/backend.mjs";
const backend = await openBackend();
const etcd = new Etcd({ endpoints: backend.endpoints });
const name = `tomb/${Date.now()}`;
const fresh = `fresh/${Date.now()}`;
async function rate(n, label) {
  const s = await etcd.session({ ttl: 30 });
  const t0 = performance.now();
  for (let i = 0; i < 300; i++) await (await s.mutex(n).lock()).unlock();
  const ms = performance.now() - t0;
  console.log(label, (300 / (ms / 1000)).toFixed(0), "cycles/s");
  await s.close();
}
await rate(fresh, "fresh name");
for (const count of [1000, 10000, 50000]) {
  // count tombstones under name/
  let made = 0;
  while (made < count) {
    const batch = Array.from({ length: 64 }, (_, i) => `${name}/x${made + i}`);
    await etcd.txn().then(...batch.map((k) => op.put(k, "v"))).commit();
    await etcd.txn().then(...batch.map((k) => op.delete(k))).commit();
    made += 64;
  }
  await rate(name, `name with ~${count} deleted keys`);
}
await backend.close();
process.exit(0);
