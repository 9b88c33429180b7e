// etcd-edge/fence without a store: what it refuses before anything is sent, and the statements and conditions it
// builds (the stores themselves check them in test/stores).
import { describe, expect, it } from "vitest";
import {
  dynamoFenced,
  dynamoRefusal,
  fencedObjectWrite,
  fencedR2Write,
  fenceTable,
  sqlFence,
} from "../../src/fence/index.js";

const refused = (code = "INVALID_ARGUMENT") => expect.objectContaining({ code });

describe("sqlFence", () => {
  it("numbers parameters as each dialect does, and guards after the caller's own", () => {
    const pg = sqlFence({ dialect: "postgres", resource: "job", token: 12 });
    expect(pg.advance.sql).toMatch(/VALUES \(\$1, \$2\).*WHERE etcd_edge_fences\.token <= excluded\.token RETURNING/);
    expect(pg.advance.params).toEqual(["job", 12]);
    expect(pg.guard(3)).toEqual({
      sql: "EXISTS (SELECT 1 FROM etcd_edge_fences WHERE resource = $4 AND token = $5)",
      params: ["job", 12],
    });
    const lite = sqlFence({ dialect: "sqlite", resource: "job", token: 12, table: "fences" });
    expect(lite.advance.sql).toMatch(/INSERT INTO fences .*VALUES \(\?1, \?2\)/);
    expect(lite.guard(0).sql).toContain("resource = ?1 AND token = ?2");
    expect(() => lite.check([{ token: 12 }])).not.toThrow();
    expect(() => lite.check([])).toThrow(refused("LOCK_LOST"));
    expect(fenceTable("postgres")).toContain("token BIGINT NOT NULL");
    expect(fenceTable("sqlite", "fences")).toContain("CREATE TABLE IF NOT EXISTS fences (resource TEXT PRIMARY KEY");
  });

  it("refuses a bad dialect, token, resource or table name before building anything", () => {
    const ok = { dialect: "postgres", resource: "job", token: 1 } as const;
    expect(() => sqlFence({ ...ok, dialect: "mysql" as never })).toThrow(refused());
    for (const token of [0, -1, 1.5, Number.NaN, "3" as never, 2 ** 53]) {
      expect(() => sqlFence({ ...ok, token })).toThrow(refused());
    }
    expect(() => sqlFence({ ...ok, resource: "" })).toThrow(refused());
    for (const table of ["fences; DROP TABLE x", "1fences", "a-b", ""]) {
      expect(() => sqlFence({ ...ok, table })).toThrow(/plain SQL identifier/);
      expect(() => fenceTable("sqlite", table)).toThrow(refused());
    }
  });
});

describe("dynamoFenced", () => {
  it("ANDs the fence with the caller's condition and sets the fence attribute", () => {
    const put = dynamoFenced(
      { TableName: "t", Item: { id: { S: "a" } }, ConditionExpression: "attribute_exists(id)" },
      { token: 8, attribute: "fence" },
    );
    expect(put.ConditionExpression).toBe(
      "(attribute_exists(id)) AND (attribute_not_exists(#etcdEdgeFence) OR #etcdEdgeFence <= :etcdEdgeFence)",
    );
    expect(put.Item).toEqual({ id: { S: "a" }, fence: { N: "8" } });
    expect(put.ExpressionAttributeNames).toEqual({ "#etcdEdgeFence": "fence" });
    expect(put.ReturnValuesOnConditionCheckFailure).toBe("ALL_OLD");
    const update = dynamoFenced({ UpdateExpression: "SET a = :a REMOVE b" }, { token: 8 });
    expect(update.UpdateExpression).toBe("SET #etcdEdgeFence = :etcdEdgeFence, a = :a REMOVE b");
    expect(dynamoFenced({ UpdateExpression: "REMOVE b" }, { token: 8 }).UpdateExpression).toBe(
      "SET #etcdEdgeFence = :etcdEdgeFence REMOVE b",
    );
  });

  it("refuses what it cannot fence", () => {
    expect(() => dynamoFenced({ TableName: "t" }, { token: 1 })).toThrow(/PutItem \(Item\) or an UpdateItem/);
    expect(() => dynamoFenced({ Item: {} }, { token: 0 })).toThrow(refused());
    expect(() => dynamoFenced({ Item: {} }, { token: 1, attribute: "" })).toThrow(refused());
  });

  it("dynamoRefusal: LOCK_LOST only when the item's fence was newer", () => {
    const failed = (fence?: string) => ({
      __type: "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
      ...(fence === undefined ? {} : { Item: { etcdEdgeFence: { N: fence } } }),
    });
    expect(dynamoRefusal(failed("9"), { token: 5, resource: "r" })).toMatchObject({ code: "LOCK_LOST" });
    expect(dynamoRefusal(failed("5"), { token: 5, resource: "r" })).toBeUndefined();
    expect(dynamoRefusal({ name: "ConditionalCheckFailedException" }, { token: 5, resource: "r" })).toMatchObject({
      code: "LOCK_LOST",
    });
    expect(dynamoRefusal(new Error("throttled"), { token: 5, resource: "r" })).toBeUndefined();
  });
});

describe("object stores", () => {
  it("fencedObjectWrite: a failing store is UNAVAILABLE, never a silent success", async () => {
    const send = async () => new Response("denied", { status: 403 });
    await expect(fencedObjectWrite(send, "https://s3/b/k", { token: 1, update: () => "x" })).rejects.toMatchObject({
      code: "UNAVAILABLE",
      message: expect.stringContaining("GET https://s3/b/k failed with HTTP 403: denied"),
    });
  });

  it("fencedObjectWrite: a write that keeps losing its race gives up after five tries", async () => {
    let puts = 0;
    const send = async (_url: string, init: RequestInit) => {
      if (init.method === "GET") return new Response(null, { status: 404 });
      puts++;
      return new Response("", { status: 412 });
    };
    await expect(fencedObjectWrite(send, "https://s3/b/k", { token: 1, update: () => "x" })).rejects.toMatchObject({
      code: "UNAVAILABLE",
      message: expect.stringContaining("lost its race to another write 5 times in a row"),
    });
    expect(puts).toBe(5);
  });

  it("fencedR2Write: a write that keeps losing its race gives up after five tries, as on S3", async () => {
    let puts = 0;
    const bucket = {
      get: async () => ({ etag: `e${puts}`, customMetadata: { "etcd-edge-fence": "1" } }),
      put: async () => {
        puts++;
        return null;
      },
    };
    await expect(fencedR2Write(bucket, "k", { token: 2, update: () => "v" })).rejects.toMatchObject({
      code: "UNAVAILABLE",
      message: expect.stringContaining("lost its race to another write 5 times in a row"),
    });
    expect(puts).toBe(5);
  });

  it("fencedR2Write: a newer fence refuses at once; put conditions as R2 takes them", async () => {
    const conditions: unknown[] = [];
    const bucket = {
      object: null as { etag: string; customMetadata: Record<string, string> } | null,
      async get() {
        return this.object;
      },
      async put(_key: string, _value: never, options: { onlyIf: unknown; customMetadata: Record<string, string> }) {
        conditions.push(options.onlyIf);
        this.object = { etag: "e1", customMetadata: options.customMetadata };
        return this.object;
      },
    };
    await fencedR2Write(bucket, "k", { token: 4, update: () => "v" });
    await fencedR2Write(bucket, "k", { token: 4, update: () => "v" });
    expect((conditions[0] as Headers).get("if-none-match")).toBe("*");
    expect(conditions[1]).toEqual({ etagMatches: "e1" });
    await expect(fencedR2Write(bucket, "k", { token: 3, update: () => "v" })).rejects.toMatchObject({
      code: "LOCK_LOST",
    });
    expect(conditions).toHaveLength(2);
  });
});
