// The classic oversell: 150 orders for a stock of 100, handled by 30 concurrent buyers that each read the
// stock, think, and write stock - 1. Without a lock their updates overwrite each other and more is sold
// than there was. With the lock (and a fenced write) exactly 100 sell, the stock ends at 0, the other 50
// orders are refused, and every sale carries a strictly increasing fencing token.
import { Etcd, op } from "etcd-edge";
import { openBackend } from "./backend.mjs";

const STOCK = 100;
const ORDERS = 150;
const BUYERS = 30;
const THINK_MS = 2;

const backend = await openBackend();
console.log(`etcd-edge demo: ${ORDERS} orders for a stock of ${STOCK}, ${BUYERS} concurrent buyers`);
console.log(`backend: ${backend.description}\n`);

const etcd = new Etcd({ endpoints: backend.endpoints, fetch: backend.fetch, namespace: `demo/${Date.now()}/` });
let failed = false;
try {
  const unlocked = await sellWithoutLock();
  console.log(
    `without a lock: sold ${unlocked.sales} from a stock of ${STOCK}` +
      (unlocked.sales > STOCK ? ` (oversold by ${unlocked.sales - STOCK})` : "") +
      `, stock left ${unlocked.stock}`,
  );

  const started = performance.now();
  const locked = await sellWithLock();
  const seconds = ((performance.now() - started) / 1000).toFixed(2);
  const increasing = locked.tokens.every((token, i) => i === 0 || token > locked.tokens[i - 1]);
  console.log(
    `with the lock:  sold ${locked.sales}, refused ${ORDERS - locked.sales}, stock left ${locked.stock}, ` +
      `fencing tokens ${increasing ? "strictly increasing" : "NOT increasing"} ` +
      `(${locked.tokens[0]} → ${locked.tokens.at(-1)}), ${ORDERS} lock acquisitions in ${seconds} s`,
  );
  failed = locked.sales !== STOCK || locked.stock !== 0 || !increasing || locked.tokens.length !== STOCK;
  console.log(failed ? "\nFAILED: the locked run is wrong" : "\nOK: no oversell under the lock");
} finally {
  await backend.close();
}
process.exitCode = failed ? 1 : 0;

/** Hands out order numbers 0..ORDERS-1 to whichever buyer asks next. */
function orderQueue() {
  let next = 0;
  return () => (next < ORDERS ? next++ : undefined);
}

async function sellWithoutLock() {
  await etcd.put("unlocked/stock", String(STOCK));
  const nextOrder = orderQueue();
  let sales = 0;
  await Promise.all(
    Array.from({ length: BUYERS }, async () => {
      while (nextOrder() !== undefined) {
        const stock = Number((await etcd.get("unlocked/stock")).value);
        if (stock <= 0) continue;
        await think();
        await etcd.put("unlocked/stock", String(stock - 1));
        sales++;
      }
    }),
  );
  return { sales, stock: Number((await etcd.get("unlocked/stock")).value) };
}

async function sellWithLock() {
  await etcd.put("locked/stock", String(STOCK));
  const nextOrder = orderQueue();
  const tokens = [];
  await Promise.all(
    Array.from({ length: BUYERS }, async (_, buyer) => {
      const session = await etcd.session({ ttl: 10 });
      try {
        while (nextOrder() !== undefined) {
          const lock = await session.mutex("locked/lock").lock({ timeout: 30_000 });
          try {
            const stock = Number((await etcd.get("locked/stock")).value);
            if (stock <= 0) continue;
            await think();
            const sale = await etcd
              .txn()
              .if(lock.ifHeld())
              .then(
                op.put("locked/stock", String(stock - 1)),
                op.put(`locked/sales/${lock.revision}`, `buyer ${buyer}`),
              )
              .commit();
            if (!sale.succeeded) throw new Error(`buyer ${buyer}: the fenced write was refused`);
            tokens.push(lock.revision);
          } finally {
            await lock.unlock();
          }
        }
      } finally {
        await session.close();
      }
    }),
  );
  const { count } = await etcd.range({ prefix: "locked/sales/", countOnly: true });
  if (count !== tokens.length) throw new Error(`${count} sales stored but ${tokens.length} recorded`);
  return { sales: tokens.length, stock: Number((await etcd.get("locked/stock")).value), tokens };
}

function think() {
  return new Promise((resolve) => setTimeout(resolve, THINK_MS));
}
