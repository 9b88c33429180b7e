import { binToBase64, encodeBase64 } from "./bytes.js";

/**
 * Protojson as the 3.4 gateway writes it: proto field names, int64 as strings, zero values omitted.
 * Builders add a field only when it is not the zero value, so every response shape stays exact.
 */
export type Out = Record<string, unknown>;

export function setInt(out: Out, name: string, v: number | bigint): void {
  if (v !== 0 && v !== 0n) out[name] = String(v);
}

export function setBool(out: Out, name: string, v: boolean): void {
  if (v) out[name] = true;
}

export function setList(out: Out, name: string, v: readonly unknown[]): void {
  if (v.length > 0) out[name] = v;
}

export function setString(out: Out, name: string, v: string): void {
  if (v !== "") out[name] = v;
}

export interface HeaderFields {
  clusterId: bigint;
  memberId: bigint;
  revision: number;
  raftTerm: number;
}

export function header(h: HeaderFields): Out {
  const out: Out = {};
  setInt(out, "cluster_id", h.clusterId);
  setInt(out, "member_id", h.memberId);
  setInt(out, "revision", h.revision);
  setInt(out, "raft_term", h.raftTerm);
  return out;
}

/** A stored key-value, as mvccpb.KeyValue encodes it (keys as binary strings). */
export interface KvFields {
  readonly key: string;
  readonly createRevision: number;
  readonly modRevision: number;
  readonly version: number;
  readonly value: Uint8Array;
  readonly lease: bigint;
}

/** `dropsLease`: a `keys_only` read leaves the lease out (the dialect's `keysOnlyDropsLease`). */
export function encodeKv(kv: KvFields, keysOnly = false, dropsLease = false): Out {
  const out: Out = {};
  if (kv.key !== "") out.key = binToBase64(kv.key);
  setInt(out, "create_revision", kv.createRevision);
  setInt(out, "mod_revision", kv.modRevision);
  setInt(out, "version", kv.version);
  if (!keysOnly && kv.value.length > 0) out.value = encodeBase64(kv.value);
  if (!(keysOnly && dropsLease)) setInt(out, "lease", kv.lease);
  return out;
}
