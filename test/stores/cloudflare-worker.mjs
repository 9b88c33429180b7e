// The Worker the D1 and R2 fence tests run in Miniflare: a counter per resource, read and written over HTTP by the
// test's worker processes (which hold the lock, freeze and resume), with the write fenced by etcd-edge/fence inside
// the Worker, as a user's Worker would write it. Bundled by test/support/stores.ts from the built package.
import { fencedR2Write, fenceTable, sqlFence } from "../../dist/fence.js";

const json = (body, status = 200) => Response.json(body, { status });

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const store = url.searchParams.get("store");
    const resource = url.searchParams.get("resource");
    const key = `counters/${resource}`;
    try {
      if (url.pathname === "/setup" && store === "d1") {
        await env.DB.batch([
          env.DB.prepare(fenceTable("sqlite")),
          env.DB.prepare("CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)"),
          env.DB.prepare("INSERT INTO counters (name, value) VALUES (?1, 0)").bind(resource),
        ]);
        return json({ ok: true });
      }
      if (url.pathname === "/setup" && store === "r2") {
        await env.BUCKET.put(key, "0");
        return json({ ok: true });
      }
      if (url.pathname === "/read" && store === "d1") {
        const row = await env.DB.prepare("SELECT value FROM counters WHERE name = ?1").bind(resource).first();
        return json({ value: row.value });
      }
      if (url.pathname === "/read" && store === "r2") {
        const object = await env.BUCKET.get(key);
        return json({ value: Number(await object.text()) });
      }
      if (url.pathname === "/write") {
        const value = Number(url.searchParams.get("value"));
        const token = Number(url.searchParams.get("token"));
        const fenced = url.searchParams.get("fenced") === "1";
        if (store === "d1") return json(await writeD1(env.DB, resource, value, token, fenced));
        if (store === "r2") return json(await writeR2(env.BUCKET, key, value, token, fenced));
      }
      return json({ error: `no route ${url.pathname} for ${store}` }, 404);
    } catch (error) {
      return json({ code: error?.code, error: String(error?.message ?? error) }, error?.code ? 409 : 500);
    }
  },
};

/**
 * D1's batch is one transaction that cannot stop between statements: the fence advances first, and the write is
 * guarded by the fence still holding this token, so a refused advance leaves it a no-op; then `check` says so.
 */
async function writeD1(db, resource, value, token, fenced) {
  const update = "UPDATE counters SET value = ?1 WHERE name = ?2";
  if (!fenced) {
    await db.prepare(update).bind(value, resource).run();
    return { wrote: true };
  }
  const fence = sqlFence({ dialect: "sqlite", resource, token });
  const guard = fence.guard(2);
  const [advanced] = await db.batch([
    db.prepare(fence.advance.sql).bind(...fence.advance.params),
    db.prepare(`${update} AND ${guard.sql}`).bind(value, resource, ...guard.params),
  ]);
  fence.check(advanced.results);
  return { wrote: true };
}

async function writeR2(bucket, key, value, token, fenced) {
  if (!fenced) {
    await bucket.put(key, String(value));
    return { wrote: true };
  }
  await fencedR2Write(bucket, key, { token, update: () => String(value) });
  return { wrote: true };
}
