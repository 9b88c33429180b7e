// etcd over its JSON gateway with the global fetch, straight to a member: no SDK code, so an SDK bug cannot blind
// what reads here (the chaos runner's judge, the runtimes' checks, the harness's own tests). Not a fake gateway:
// that is gateway.ts. Imports only wire.ts, so plain Node (npm run chaos) loads it too.
import { b64, prefixEnd, unb64 } from "./wire.ts";

/** What a member answered, whatever the status. */
export interface Answer {
  status: number;
  text: string;
}

/**
 * One POST with a deadline of its own. `grpc-metadata-hasleader` makes a member without a leader answer 503 at
 * once instead of after ~7 s.
 */
export async function send(
  endpoint: string,
  path: string,
  body: unknown,
  { headers = {}, timeoutMs = 2_000 }: { headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<Answer> {
  const response = await fetch(endpoint + path, {
    method: "POST",
    headers: { "content-type": "application/json", "grpc-metadata-hasleader": "true", ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  return { status: response.status, text: await response.text() };
}

/** One POST (see send); throws on anything but a 200 with JSON. */
export async function post<T>(endpoint: string, path: string, body: unknown, timeoutMs = 2_000): Promise<T> {
  const { status, text } = await send(endpoint, path, body, { timeoutMs });
  if (status !== 200) throw new Error(`${path} on ${endpoint}: HTTP ${status} ${text.slice(0, 200)}`);
  return JSON.parse(text) as T;
}

/** Tries each endpoint in turn until one answers. */
export async function postAny<T>(
  endpoints: readonly string[],
  path: string,
  body: unknown,
  timeoutMs = 2_000,
): Promise<T> {
  let last: unknown;
  for (const endpoint of endpoints) {
    try {
      return await post<T>(endpoint, path, body, timeoutMs);
    } catch (error) {
      last = error;
    }
  }
  throw last;
}

export interface WireKv {
  key?: string;
  value?: string;
  create_revision?: string;
  mod_revision?: string;
  lease?: string;
}

export interface Kv {
  key: string;
  value: string;
  createRevision: number;
  modRevision: number;
  /** Decimal lease ID, "0" when none. */
  lease: string;
}

export function decodeKv(kv: WireKv): Kv {
  return {
    key: unb64(kv.key),
    value: unb64(kv.value),
    createRevision: Number(kv.create_revision ?? 0),
    modRevision: Number(kv.mod_revision ?? 0),
    lease: kv.lease ?? "0",
  };
}

export interface MemberStatus {
  memberId: string;
  leader: string;
  raftTerm: number;
  revision: number;
}

export async function memberStatus(endpoint: string, timeoutMs = 1_000): Promise<MemberStatus> {
  const s = await post<{ header?: { member_id?: string; revision?: string }; leader?: string; raftTerm?: string }>(
    endpoint,
    "/v3/maintenance/status",
    {},
    timeoutMs,
  );
  return {
    memberId: s.header?.member_id ?? "",
    leader: s.leader ?? "0",
    raftTerm: Number(s.raftTerm ?? 0),
    revision: Number(s.header?.revision ?? 0),
  };
}

/** Every key under `prefix`, oldest first (by create revision), with the read's revision. */
export async function rangePrefix(
  endpoints: readonly string[],
  prefix: string,
  options: { limit?: number; timeoutMs?: number } = {},
): Promise<{ kvs: Kv[]; revision: number }> {
  const r = await postAny<{ header?: { revision?: string }; kvs?: WireKv[] }>(
    endpoints,
    "/v3/kv/range",
    {
      key: b64(prefix),
      range_end: prefixEnd(prefix),
      sort_order: "ASCEND",
      sort_target: "CREATE",
      limit: options.limit === undefined ? undefined : String(options.limit),
    },
    options.timeoutMs,
  );
  return { kvs: (r.kvs ?? []).map(decodeKv), revision: Number(r.header?.revision ?? 0) };
}

export async function putKey(endpoints: readonly string[], key: string, value: string): Promise<number> {
  const r = await postAny<{ header?: { revision?: string } }>(endpoints, "/v3/kv/put", {
    key: b64(key),
    value: b64(value),
  });
  return Number(r.header?.revision ?? 0);
}

export async function compact(endpoints: readonly string[], revision: number): Promise<void> {
  await postAny(endpoints, "/v3/kv/compaction", { revision: String(revision) });
}
