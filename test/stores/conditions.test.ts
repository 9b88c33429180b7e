// What the fences rest on, shown on the stores themselves (no lock involved): a conditional write that the store
// refuses when its condition is stale, and the fence helpers' answers to a token older than the store's.
// S3 and DynamoDB run on moto (an emulator: it proves the requests and the conditions' semantics, not a real
// service's behaviour under concurrency); Postgres is the real server.
import { AwsClient } from "aws4fetch";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dynamoFenced, dynamoRefusal, fencedObjectWrite, fenceTable, sqlFence } from "../../src/fence/index.js";
import { uniqueName } from "../support/etcd.js";
import { type Store, startMoto, startPostgres } from "../support/stores.js";

let moto: Store;
let postgres: Store;

beforeAll(async () => {
  [moto, postgres] = await Promise.all([startMoto(), startPostgres()]);
}, 120_000);

afterAll(async () => {
  await Promise.all([moto?.stop(), postgres?.stop()]);
});

const credentials = { accessKeyId: "test", secretAccessKey: "test", region: "us-east-1" };

describe("S3 (moto)", () => {
  const s3 = new AwsClient({ ...credentials, service: "s3" });
  const send = (url: string, init: RequestInit) => s3.fetch(url, init);
  const bucket = () => `${moto.url}/conditions`;

  beforeAll(async () => {
    await (await send(bucket(), { method: "PUT" })).text();
  });

  it("refuses a stale If-Match and an If-None-Match: * over an object with 412", async () => {
    const url = `${bucket()}/${uniqueName("object")}`;
    const first = await send(url, { method: "PUT", body: "one", headers: { "if-none-match": "*" } });
    expect(first.status).toBe(200);
    const etag = first.headers.get("etag")!;
    const again = await send(url, { method: "PUT", body: "two", headers: { "if-none-match": "*" } });
    expect(again.status).toBe(412);
    expect((await send(url, { method: "PUT", body: "two", headers: { "if-match": etag } })).status).toBe(200);
    // The object moved on: the ETag read before is stale now.
    expect((await send(url, { method: "PUT", body: "three", headers: { "if-match": etag } })).status).toBe(412);
    expect(await (await send(url, { method: "GET" })).text()).toBe("two");
  });

  it("fencedObjectWrite: a newer token's write refuses every older one, whatever came first", async () => {
    const url = `${bucket()}/${uniqueName("fenced")}`;
    await fencedObjectWrite(send, url, { token: 7, update: () => "by 7" });
    await expect(fencedObjectWrite(send, url, { token: 5, update: () => "by 5" })).rejects.toMatchObject({
      code: "LOCK_LOST",
      message: expect.stringContaining("the store has seen token 7"),
    });
    // The same holder writes again, and a later one after it.
    await fencedObjectWrite(send, url, { token: 7, update: async (current) => `${await current!.text()}, again` });
    await fencedObjectWrite(send, url, { token: 9, update: () => "by 9" });
    const object = await send(url, { method: "GET" });
    expect(object.headers.get("x-amz-meta-etcd-edge-fence")).toBe("9");
    expect(await object.text()).toBe("by 9");
  });

  it("fencedObjectWrite: of writers racing with tokens 1 to 6, none lands after a newer one", async () => {
    const url = `${bucket()}/${uniqueName("race")}`;
    const outcomes = await Promise.allSettled(
      [1, 2, 3, 4, 5, 6].map((token) => fencedObjectWrite(send, url, { token, update: () => `by ${token}` })),
    );
    const object = await send(url, { method: "GET" });
    const kept = Number(object.headers.get("x-amz-meta-etcd-edge-fence"));
    expect(await object.text()).toBe(`by ${kept}`);
    // Every write that succeeded carried a token no newer than the one the object kept.
    outcomes.forEach((outcome, i) => {
      if (outcome.status === "fulfilled") expect(i + 1).toBeLessThanOrEqual(kept);
      else expect((outcome.reason as { code: string }).code).toMatch(/LOCK_LOST|UNAVAILABLE/);
    });
  });
});

describe("DynamoDB (moto)", () => {
  const dynamo = new AwsClient({ ...credentials, service: "dynamodb" });
  const dynamoCall = async (target: string, body: object) => {
    const answer = await dynamo.fetch(moto.url, {
      method: "POST",
      headers: { "content-type": "application/x-amz-json-1.0", "x-amz-target": `DynamoDB_20120810.${target}` },
      body: JSON.stringify(body),
    });
    const parsed = (await answer.json()) as Record<string, unknown>;
    if (!answer.ok) throw parsed;
    return parsed;
  };
  const TableName = "conditions";

  beforeAll(async () => {
    await dynamoCall("CreateTable", {
      TableName,
      KeySchema: [{ AttributeName: "id", KeyType: "HASH" }],
      AttributeDefinitions: [{ AttributeName: "id", AttributeType: "S" }],
      BillingMode: "PAY_PER_REQUEST",
    });
  });

  it("an UpdateItem fenced: newer and equal tokens write, an older one is LOCK_LOST", async () => {
    const Key = { id: { S: uniqueName("item") } };
    const update = (token: number, value: string) =>
      dynamoCall(
        "UpdateItem",
        dynamoFenced(
          {
            TableName,
            Key,
            UpdateExpression: "SET #v = :v",
            ExpressionAttributeNames: { "#v": "value" },
            ExpressionAttributeValues: { ":v": { S: value } },
          },
          { token },
        ),
      );
    await update(4, "by 4");
    await update(4, "by 4 again");
    const refused = await update(3, "by 3").catch((failure: unknown) => failure);
    expect(dynamoRefusal(refused, { token: 3, resource: "item" })).toMatchObject({
      code: "LOCK_LOST",
      message: expect.stringContaining("token 4"),
    });
    const { Item } = (await dynamoCall("GetItem", { TableName, Key, ConsistentRead: true })) as {
      Item: Record<string, { S?: string; N?: string }>;
    };
    expect(Item.value!.S).toBe("by 4 again");
    expect(Item.etcdEdgeFence!.N).toBe("4");
  });

  it("a refusal of the caller's own condition is not called a lost lock", async () => {
    const Key = { id: { S: uniqueName("own") } };
    const names = { ExpressionAttributeNames: { "#s": "state" } };
    await dynamoCall("PutItem", { TableName, Item: { ...Key, state: { S: "open" } } });
    const mine = { TableName, Item: { ...Key, state: { S: "done" } }, ConditionExpression: "attribute_not_exists(#s)" };
    const failure = await dynamoCall("PutItem", dynamoFenced({ ...mine, ...names }, { token: 2 })).catch(
      (e: unknown) => e,
    );
    expect((failure as { __type: string }).__type).toMatch(/ConditionalCheckFailedException/);
    expect(dynamoRefusal(failure, { token: 2, resource: "own" })).toBeUndefined();
  });
});

describe("Postgres", () => {
  it("advance: a newer or equal token moves the fence, an older one returns no row and changes nothing", async () => {
    const client = new pg.Client({ connectionString: postgres.url });
    await client.connect();
    try {
      await client.query(fenceTable("postgres", "fences_here"));
      const resource = uniqueName("row");
      const advance = async (token: number) => {
        const fence = sqlFence({ dialect: "postgres", resource, token, table: "fences_here" });
        const { rows } = await client.query(fence.advance.sql, fence.advance.params);
        return { fence, rows };
      };
      expect((await advance(10)).rows).toHaveLength(1);
      expect((await advance(10)).rows).toHaveLength(1);
      const stale = await advance(9);
      expect(stale.rows).toEqual([]);
      expect(() => stale.fence.check(stale.rows)).toThrow(expect.objectContaining({ code: "LOCK_LOST" }));
      const guard = stale.fence.guard(0);
      const { rows } = await client.query(`SELECT ${guard.sql} AS held`, guard.params);
      expect(rows[0].held).toBe(false);
      const { rows: kept } = await client.query("SELECT token FROM fences_here WHERE resource = $1", [resource]);
      expect(Number(kept[0].token)).toBe(10);
    } finally {
      await client.end();
    }
  });
});
