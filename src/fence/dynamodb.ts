import { describe, fenceRefused, invalidArgument } from "../errors/catalogue.js";
import { EtcdError } from "../errors/etcd-error.js";
import { resourceArg, tokenArg } from "./args.js";

/** The parts of a DynamoDB PutItem or UpdateItem input a fence adds to (the AWS SDK's and the JSON API's names). */
export interface DynamoWrite {
  /** The table written to. */
  TableName?: string;
  /** PutItem: the item; the fence attribute is set on it. */
  Item?: Record<string, unknown>;
  /** UpdateItem: the fence attribute is set by it too. */
  UpdateExpression?: string;
  /** Your own condition, if any: the fence is ANDed with it. */
  ConditionExpression?: string;
  /** Your attribute names (`#name`): the fence's `#etcdEdgeFence` is added. */
  ExpressionAttributeNames?: Record<string, string>;
  /** Your attribute values (`:value`): the fence's `:etcdEdgeFence` is added. */
  ExpressionAttributeValues?: Record<string, unknown>;
  /** Set to `ALL_OLD` by the fence: a refusal then says which fence the item had. */
  ReturnValuesOnConditionCheckFailure?: string;
  [other: string]: unknown;
}

/** The fence of a DynamoDB write: the holder's token, and the item attribute that keeps it. */
export interface DynamoFenceOptions {
  /** The holder's fencing token: `lock.revision`. */
  token: number;
  /** The item's attribute that keeps its fence. Default `etcdEdgeFence`. */
  attribute?: string | undefined;
}

/** What a fenced write always has: the condition, its names and values, and the old item on a refusal. */
export type Fenced = Required<
  Pick<
    DynamoWrite,
    | "ConditionExpression"
    | "ExpressionAttributeNames"
    | "ExpressionAttributeValues"
    | "ReturnValuesOnConditionCheckFailure"
  >
>;

const NAME = "#etcdEdgeFence";
const VALUE = ":etcdEdgeFence";

/**
 * `input` (a PutItem or UpdateItem) fenced with `token`: it writes the token to the item's fence attribute, on the
 * condition (ANDed with yours) that the item has no fence or one no newer than the token. DynamoDB checks the
 * condition and the write as one: a stale holder's write fails with ConditionalCheckFailedException, which
 * `dynamoRefusal` turns into LOCK_LOST. The item's old value comes back with that failure
 * (`ReturnValuesOnConditionCheckFailure: "ALL_OLD"`), so a refusal of your own condition is told apart.
 */
export function dynamoFenced<W extends DynamoWrite>(input: W, options: DynamoFenceOptions): W & Fenced {
  const token = tokenArg(options.token);
  const attribute = options.attribute ?? "etcdEdgeFence";
  if (typeof attribute !== "string" || attribute.length === 0) {
    throw invalidArgument(`attribute must be a non-empty string, got ${describe(attribute)}`);
  }
  const number = { N: String(token) };
  const fence = `(attribute_not_exists(${NAME}) OR ${NAME} <= ${VALUE})`;
  const fenced: W & Fenced = {
    ...input,
    ConditionExpression: input.ConditionExpression ? `(${input.ConditionExpression}) AND ${fence}` : fence,
    ExpressionAttributeNames: { ...input.ExpressionAttributeNames, [NAME]: attribute },
    ExpressionAttributeValues: { ...input.ExpressionAttributeValues, [VALUE]: number },
    ReturnValuesOnConditionCheckFailure: "ALL_OLD",
  };
  if (input.Item !== undefined) return { ...fenced, Item: { ...input.Item, [attribute]: number } };
  const update = input.UpdateExpression;
  if (update === undefined)
    throw invalidArgument("dynamoFenced takes a PutItem (Item) or an UpdateItem (UpdateExpression)");
  // A SET clause of its own, or one more assignment in the SET there is.
  const set = /\bSET\b/i.exec(update);
  const withFence =
    set === null
      ? `SET ${NAME} = ${VALUE} ${update}`
      : `${update.slice(0, set.index + set[0].length)} ${NAME} = ${VALUE},${update.slice(set.index + set[0].length)}`;
  return { ...fenced, UpdateExpression: withFence };
}

/**
 * LOCK_LOST for a write `dynamoFenced` made that DynamoDB refused because the item's fence was newer; undefined
 * for any other failure (yours to handle). `failure` is the AWS SDK's error, or the JSON API's error body.
 */
export function dynamoRefusal(
  failure: unknown,
  options: DynamoFenceOptions & { resource: string },
): EtcdError | undefined {
  const token = tokenArg(options.token);
  const resource = resourceArg(options.resource);
  if (failure instanceof EtcdError) return undefined;
  const { name, __type, Item } = (failure ?? {}) as { name?: unknown; __type?: unknown; Item?: unknown };
  const kind = typeof __type === "string" ? __type.slice(__type.lastIndexOf("#") + 1) : name;
  if (kind !== "ConditionalCheckFailedException") return undefined;
  const old = (Item ?? {}) as Record<string, { N?: string } | undefined>;
  const newest = Number(old[options.attribute ?? "etcdEdgeFence"]?.N ?? 0);
  // The item's fence was no newer: the condition that failed is the caller's own.
  if (Item !== undefined && newest <= token) return undefined;
  return fenceRefused(resource, token, newest || undefined);
}
