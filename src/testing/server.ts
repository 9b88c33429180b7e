import { prefixEnd, type BinKey } from "./bytes.js";
import { boolField, int64Field, keyField, numField, objectField, arrayField, enumValue, type Json } from "./decode.js";
import { encodeKv, header, setInt, setList, type Out } from "./encode.js";
import { Errors } from "./errors.js";
import { AuthStore, type AuthOptions } from "./auth.js";
import { KvApplier, type KvResult } from "./kv.js";
import { Lessor, type Lease } from "./lease.js";
import { accessedRanges, FILTER_TYPE, parseDelete, parsePut, parseRange, parseTxn, type Op } from "./ops.js";
import { MvccStore, type KeyValue } from "./store.js";
import { WatchHub, type WatchSpec } from "./watch.js";

/** Virtual ms between progress notifications (etcd's default progress report interval: 10 minutes). */
export const PROGRESS_NOTIFY_INTERVAL_MS = 600_000;

export interface ServerOptions {
  auth?: AuthOptions | undefined;
  clusterId?: bigint | string | undefined;
  memberId?: bigint | string | undefined;
}

/** The answer to one endpoint call, before HTTP encoding. */
export type Reply = { kind: "json"; body: Out } | { kind: "stream"; body: ReadableStream<Uint8Array> } | { kind: "hang" };

export interface Call {
  body: Json;
  token: string | null;
  signal: AbortSignal | undefined;
}

/** All state of one in-memory etcd member, and its endpoints. */
export class EtcdState {
  clock = 0;
  raftTerm = 2;
  readonly clusterId: bigint;
  readonly memberId: bigint;
  readonly store: MvccStore;
  readonly lessor: Lessor;
  readonly watch: WatchHub;
  readonly kv: KvApplier;
  readonly auth: AuthStore | undefined;
  private nextProgressAt = PROGRESS_NOTIFY_INTERVAL_MS;

  constructor(options: ServerOptions) {
    this.clusterId = BigInt(options.clusterId ?? "14841639068965178418");
    this.memberId = BigInt(options.memberId ?? "10276657743932975437");
    this.store = new MvccStore((rev, events) => this.watch.notify(rev, events));
    this.lessor = new Lessor(() => this.clock);
    this.watch = new WatchHub(this.store, (rev) => this.header(rev));
    this.kv = new KvApplier(this.store, this.lessor);
    this.auth = options.auth ? new AuthStore(options.auth, () => this.clock) : undefined;
  }

  header(revision = this.store.revision): Out {
    return header({ clusterId: this.clusterId, memberId: this.memberId, revision, raftTerm: this.raftTerm });
  }

  private withHeader(r: KvResult): Out {
    const { header: _nested, ...rest } = r.body;
    return { header: this.header(r.revision), ...rest };
  }

  /** Moves virtual time: leases expire (in expiry order) and progress notifications fire on the way. */
  advance(ms: number): void {
    const target = this.clock + Math.max(0, ms);
    for (;;) {
      const lease = this.lessor.nextExpiry();
      const leaseAt = lease && lease.expiry <= target ? lease.expiry : Infinity;
      const progressAt = this.nextProgressAt <= target ? this.nextProgressAt : Infinity;
      if (leaseAt === Infinity && progressAt === Infinity) break;
      if (leaseAt <= progressAt && lease) {
        this.clock = Math.max(this.clock, leaseAt);
        this.revokeLease(lease);
      } else {
        this.clock = progressAt;
        this.nextProgressAt += PROGRESS_NOTIFY_INTERVAL_MS;
        this.watch.progress();
      }
    }
    this.clock = target;
  }

  /** Deletes the lease's keys in one revision (in key order, as etcd's Revoke), then forgets the lease. */
  revokeLease(lease: Lease): void {
    const keys = [...lease.keys].sort();
    if (keys.length > 0) {
      this.store.write((w) => {
        for (const key of keys) w.deleteRange(key, "");
      });
    }
    this.lessor.remove(lease.id);
  }

  leaderChange(): void {
    this.raftTerm++;
    this.lessor.refreshAll();
  }

  // ---- auth -------------------------------------------------------------------------------------------

  /** The caller's user when auth is on; throws for a bad token. Undefined means "no token" (or auth off). */
  private user(call: Call): string | undefined {
    return this.auth?.userOf(call.token);
  }

  private checkOp(call: Call, op: Op): void {
    if (!this.auth) return;
    const user = this.user(call);
    for (const r of accessedRanges(op)) this.auth.check(user, r.key, r.end, r.write);
  }

  // ---- endpoints ----------------------------------------------------------------------------------------

  range(call: Call): Reply {
    const op = parseRange(call.body);
    this.checkOp(call, op);
    return json(this.withHeader(this.kv.range(op)));
  }

  put(call: Call): Reply {
    const op = parsePut(call.body);
    this.checkOp(call, op);
    return json(this.withHeader(this.kv.put(op)));
  }

  deleteRange(call: Call): Reply {
    const op = parseDelete(call.body);
    this.checkOp(call, op);
    return json(this.withHeader(this.kv.deleteRange(op)));
  }

  txn(call: Call): Reply {
    const op = parseTxn(call.body);
    this.checkOp(call, op);
    return json(this.withHeader(this.kv.txn(op)));
  }

  compaction(call: Call): Reply {
    this.user(call);
    this.store.compact(numField(call.body, "revision"));
    return json({ header: this.header() });
  }

  leaseGrant(call: Call): Reply {
    this.user(call);
    const lease = this.lessor.grant(int64Field(call.body, "ID"), numField(call.body, "TTL"));
    const out: Out = { header: this.header() };
    setInt(out, "ID", lease.id);
    setInt(out, "TTL", lease.ttl);
    return json(out);
  }

  leaseRevoke(call: Call): Reply {
    const user = this.user(call);
    const lease = this.lessor.require(int64Field(call.body, "ID"));
    if (this.auth) for (const key of lease.keys) this.auth.check(user, key, "", true);
    this.revokeLease(lease);
    return json({ header: this.header() });
  }

  /** One keepalive per POST: a single NDJSON line, then the end of the stream, as the gateway answers. */
  leaseKeepAlive(call: Call): Reply {
    this.user(call);
    const id = int64Field(call.body, "ID");
    const lease = this.lessor.renew(id);
    const result: Out = { header: this.header() };
    setInt(result, "ID", id);
    if (lease) setInt(result, "TTL", lease.ttl);
    return { kind: "stream", body: ndjsonOnce({ result }) };
  }

  leaseTimeToLive(call: Call): Reply {
    this.user(call);
    const id = int64Field(call.body, "ID");
    const lease = this.lessor.get(id);
    const out: Out = { header: this.header() };
    setInt(out, "ID", id);
    if (!lease) {
      out["TTL"] = "-1";
      return json(out);
    }
    setInt(out, "TTL", this.lessor.remaining(lease));
    setInt(out, "grantedTTL", lease.ttl);
    if (boolField(call.body, "keys")) {
      setList(out, "keys", [...lease.keys].sort().map((k) => encodeKv({ ...ZERO, key: k })["key"]));
    }
    return json(out);
  }

  leaseLeases(call: Call): Reply {
    this.user(call);
    const out: Out = { header: this.header() };
    setList(out, "leases", this.lessor.list().map((l) => ({ ID: String(l.id) })));
    return json(out);
  }

  authenticate(call: Call): Reply {
    if (!this.auth) throw Errors.authNotEnabled();
    const name = stringField(call.body, "name");
    const password = stringField(call.body, "password");
    const token = this.auth.authenticate(name, password);
    return json({ header: this.header(), token });
  }

  openWatch(call: Call): Reply {
    const create = objectField(call.body, "create_request");
    // The gateway sends no headers before the first message, and a stream without a create request has none.
    if (!create) return { kind: "hang" };
    const spec: WatchSpec = {
      key: keyField(create, "key"),
      end: keyField(create, "range_end"),
      startRevision: numField(create, "start_revision"),
      prevKv: boolField(create, "prev_kv"),
      noPut: false,
      noDelete: false,
      progressNotify: boolField(create, "progress_notify"),
    };
    for (const f of arrayField(create, "filters")) {
      const v = enumValue(f, FILTER_TYPE, "etcdserverpb.WatchCreateRequest_FilterType");
      if (v === 0) spec.noPut = true;
      if (v === 1) spec.noDelete = true;
    }
    return { kind: "stream", body: this.watch.open(spec, call.signal, this.watchRefusal(call, spec)) };
  }

  /** Auth failures on a watch are a canceled first line (HTTP 200), with the gRPC error as text. */
  private watchRefusal(call: Call, spec: WatchSpec): string | undefined {
    if (!this.auth) return undefined;
    try {
      const user = this.user(call);
      this.auth.check(user, spec.key, spec.end, false);
      return undefined;
    } catch (err) {
      const e = err as { code: number; message: string };
      const name = { 3: "InvalidArgument", 7: "PermissionDenied", 16: "Unauthenticated" }[e.code] ?? "Unknown";
      return `rpc error: code = ${name} desc = ${e.message}`;
    }
  }

  // ---- inspection -----------------------------------------------------------------------------------------

  get(key: BinKey): KeyValue | undefined {
    return this.store.get(key);
  }

  keys(prefix: BinKey): BinKey[] {
    return this.store.range(prefix === "" ? "\0" : prefix, prefix === "" ? "\0" : prefixEnd(prefix)).map((kv) => kv.key);
  }

  /** Seeds a key as a plain put would. */
  putDirect(key: BinKey, value: Uint8Array, lease: bigint): number {
    return this.kv.put({ kind: "put", key, value, lease, prevKv: false, ignoreValue: false, ignoreLease: false }).revision;
  }
}

const ZERO: KeyValue = { key: "", createRevision: 0, modRevision: 0, version: 0, value: new Uint8Array(), lease: 0n };

function stringField(j: Json, name: string): string {
  const v = j[name];
  return typeof v === "string" ? v : "";
}

function json(body: Out): Reply {
  return { kind: "json", body };
}

function ndjsonOnce(line: Out): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(`${JSON.stringify(line)}\n`);
  return new ReadableStream({
    start(c) {
      c.enqueue(bytes);
      c.close();
    },
  });
}
