// One counter per resource in each store the fence tests cover, read and written as a user's code under a lock
// would: read it, then write the next value, plainly (`fenced` false: the control) or fenced with the holder's
// token through etcd-edge/fence (the built package). Plain JS: the worker processes (worker.mjs) load it with Node.
import { DatabaseSync } from "node:sqlite";
import { AwsClient } from "aws4fetch";
import pg from "pg";
import { dynamoFenced, dynamoRefusal, fencedObjectWrite, fenceTable, sqlFence } from "../../dist/fence.js";

/** `conn`: where the store is (`url`; `file` for SQLite). Each: { setup, read, write(value, token, fenced), close }. */
export const adapters = {
  async postgres(conn, resource) {
    const client = new pg.Client({ connectionString: conn.url });
    await client.connect();
    return {
      async setup() {
        await client.query(fenceTable("postgres"));
        await client.query("CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL)");
        await client.query("INSERT INTO counters (name, value) VALUES ($1, 0)", [resource]);
      },
      async read() {
        const { rows } = await client.query("SELECT value FROM counters WHERE name = $1", [resource]);
        return Number(rows[0].value);
      },
      async write(value, token, fenced) {
        const update = ["UPDATE counters SET value = $1 WHERE name = $2", [value, resource]];
        if (!fenced) return void (await client.query(...update));
        // The fence's row lock holds a later holder's advance until this transaction ends.
        const fence = sqlFence({ dialect: "postgres", resource, token });
        await client.query("BEGIN");
        try {
          const { rows } = await client.query(fence.advance.sql, fence.advance.params);
          fence.check(rows);
          await client.query(...update);
          await client.query("COMMIT");
        } catch (error) {
          await client.query("ROLLBACK");
          throw error;
        }
      },
      close: () => client.end(),
    };
  },

  async sqlite(conn, resource) {
    const db = new DatabaseSync(conn.file);
    db.exec("PRAGMA busy_timeout = 10000");
    return {
      async setup() {
        db.exec(fenceTable("sqlite"));
        db.exec("CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)");
        db.prepare("INSERT INTO counters (name, value) VALUES (?1, 0)").run(resource);
      },
      async read() {
        return Number(db.prepare("SELECT value FROM counters WHERE name = ?1").get(resource).value);
      },
      async write(value, token, fenced) {
        const update = db.prepare("UPDATE counters SET value = ?1 WHERE name = ?2");
        if (!fenced) return void update.run(value, resource);
        const fence = sqlFence({ dialect: "sqlite", resource, token });
        db.exec("BEGIN IMMEDIATE");
        try {
          fence.check(db.prepare(fence.advance.sql).all(...fence.advance.params));
          update.run(value, resource);
          db.exec("COMMIT");
        } catch (error) {
          db.exec("ROLLBACK");
          throw error;
        }
      },
      close: async () => db.close(),
    };
  },

  async s3(conn, resource) {
    const aws = new AwsClient({ accessKeyId: "test", secretAccessKey: "test", region: "us-east-1", service: "s3" });
    const send = (url, init) => aws.fetch(url, init);
    const bucket = `${conn.url}/fences`;
    const url = `${bucket}/counters/${resource}`;
    return {
      async setup() {
        const made = await send(bucket, { method: "PUT" });
        if (!made.ok && made.status !== 409) throw new Error(`bucket: HTTP ${made.status} ${await made.text()}`);
        await made.body?.cancel();
        await expectOk(await send(url, { method: "PUT", body: "0" }));
      },
      async read() {
        const answer = await send(url, { method: "GET" });
        if (!answer.ok) throw new Error(`GET: HTTP ${answer.status}`);
        return Number(await answer.text());
      },
      async write(value, token, fenced) {
        if (!fenced) return expectOk(await send(url, { method: "PUT", body: String(value) }));
        await expectOk(await fencedObjectWrite(send, url, { token, update: () => String(value) }));
      },
      close: async () => {},
    };
  },

  async dynamodb(conn, resource) {
    const aws = new AwsClient({
      accessKeyId: "test",
      secretAccessKey: "test",
      region: "us-east-1",
      service: "dynamodb",
    });
    const call = async (target, body) => {
      const answer = await aws.fetch(conn.url, {
        method: "POST",
        headers: { "content-type": "application/x-amz-json-1.0", "x-amz-target": `DynamoDB_20120810.${target}` },
        body: JSON.stringify(body),
      });
      const parsed = await answer.json();
      if (!answer.ok) throw Object.assign(new Error(`${target}: ${parsed.message ?? parsed.Message}`), parsed);
      return parsed;
    };
    const TableName = "counters";
    const key = { name: { S: resource } };
    return {
      async setup() {
        await call("CreateTable", {
          TableName,
          KeySchema: [{ AttributeName: "name", KeyType: "HASH" }],
          AttributeDefinitions: [{ AttributeName: "name", AttributeType: "S" }],
          BillingMode: "PAY_PER_REQUEST",
        }).catch((error) => {
          if (!String(error.__type).endsWith("ResourceInUseException")) throw error;
        });
        await call("PutItem", { TableName, Item: { ...key, value: { N: "0" } } });
      },
      async read() {
        const { Item } = await call("GetItem", { TableName, Key: key, ConsistentRead: true });
        return Number(Item.value.N);
      },
      async write(value, token, fenced) {
        const put = { TableName, Item: { ...key, value: { N: String(value) } } };
        if (!fenced) return void (await call("PutItem", put));
        try {
          await call("PutItem", dynamoFenced(put, { token }));
        } catch (error) {
          throw dynamoRefusal(error, { token, resource }) ?? error;
        }
      },
      close: async () => {},
    };
  },

  d1: (conn, resource) => cloudflare("d1", conn, resource),
  r2: (conn, resource) => cloudflare("r2", conn, resource),
};

/** D1 and R2 live in the Worker Miniflare runs (cloudflare-worker.mjs): this process calls it over HTTP. */
async function cloudflare(store, conn, resource) {
  const call = async (path, query = {}) => {
    const params = new URLSearchParams({ store, resource, ...query });
    const answer = await fetch(`${conn.url}${path}?${params}`, { method: path === "/read" ? "GET" : "POST" });
    const body = await answer.json();
    if (!answer.ok) throw Object.assign(new Error(body.error), { code: body.code });
    return body;
  };
  return {
    setup: () => call("/setup"),
    read: async () => (await call("/read")).value,
    write: (value, token, fenced) =>
      call("/write", { value: String(value), token: String(token), fenced: fenced ? "1" : "0" }),
    close: async () => {},
  };
}

async function expectOk(answer) {
  const text = await answer.text();
  if (!answer.ok) throw new Error(`HTTP ${answer.status}: ${text}`);
}
