import type { Member } from "../member.js";
import { parseDelete, parseRange, parseTxn } from "../ops.js";
import type { StoreEvent } from "../store.js";
import { binToBytes, bytesToBin, prefixEnd, type BinKey } from "../wire/bytes.js";
import type { Out } from "../wire/encode.js";
import { Errors, GrpcCode, GrpcStatusError } from "../wire/errors.js";
import { build, type MsgInit } from "../wire/message.js";
import { messageSize } from "../wire/proto-size.js";
import { DeleteRangeRequest, RangeRequest, TxnRequest } from "../wire/schema.js";
import { toByteArray } from "base64-js";
import { RaftField } from "./kv.js";
import { grantLease } from "./lease.js";

/** A key-value as the in-process client reads it back from a response. */
export interface Kv {
  key: BinKey;
  createRevision: number;
  modRevision: number;
  value: Uint8Array;
  out: Out;
}

export function kvsOf(range: Out | undefined): Kv[] {
  const kvs = (range?.kvs as Out[] | undefined) ?? [];
  return kvs.map((out) => ({
    key: bytesToBin(toByteArray(String(out.key ?? ""))),
    createRevision: Number(out.create_revision ?? 0),
    modRevision: Number(out.mod_revision ?? 0),
    value: out.value === undefined ? new Uint8Array() : toByteArray(String(out.value)),
    out,
  }));
}

export function revisionOf(header: Out): number {
  return Number((header as { revision?: string }).revision ?? 0);
}

/** clientv3's options for "the oldest (or newest) key under a prefix". */
export function topOf(prefix: BinKey, order: "first" | "last", maxCreateRevision = 0n): MsgInit {
  return {
    key: binToBytes(prefix),
    range_end: binToBytes(prefixEnd(prefix)),
    limit: 1n,
    sort_order: order === "first" ? 1 : 2,
    sort_target: 2,
    max_create_revision: maxCreateRevision,
  };
}

/**
 * The clientv3 that etcd's v3lock and v3election servers use (v3client): requests go straight to the member, and
 * any error comes back to the gateway as gRPC code 2 (Unknown) with the server's message.
 */
export class InProcessClient {
  constructor(
    readonly member: Member,
    readonly signal: AbortSignal,
  ) {}

  private call<T>(fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (err instanceof GrpcStatusError) throw new GrpcStatusError(GrpcCode.Unknown, err.message);
      throw err;
    }
  }

  grant(ttl: number): bigint {
    return this.call(() => grantLease(this.member, 0n, ttl).id);
  }

  get(range: MsgInit): { header: Out; kvs: Kv[] } {
    return this.call(() => {
      const r = this.member.kv.range(parseRange(build(RangeRequest, range)));
      return { header: this.member.header(r.revision), kvs: kvsOf(r.body) };
    });
  }

  txn(init: MsgInit): { header: Out; succeeded: boolean; responses: Out[] } {
    return this.call(() => {
      const msg = build(TxnRequest, init);
      const r = this.member.kv.txn(parseTxn(msg), () => this.member.propose(messageSize(msg), RaftField.txn));
      return {
        header: this.member.header(r.revision),
        succeeded: r.body.succeeded === true,
        responses: (r.body.responses as Out[] | undefined) ?? [],
      };
    });
  }

  delete(key: BinKey): Out {
    return this.call(() => {
      const msg = build(DeleteRangeRequest, { key: binToBytes(key) });
      const r = this.member.kv.deleteRange(parseDelete(msg), () =>
        this.member.propose(messageSize(msg), RaftField.deleteRange),
      );
      return this.member.header(r.revision);
    });
  }

  /**
   * clientv3 Watch(key or prefix, WithRev(rev)): calls `onEvent` with each event from revision `rev` on (history
   * first, then live) until it returns true; resolves then. Rejects when aborted or when `rev` is compacted.
   */
  watch(key: BinKey, end: BinKey, rev: number, onEvent: (ev: StoreEvent, revision: number) => boolean): Promise<void> {
    const { member, signal } = this;
    return new Promise<void>((resolve, reject) => {
      const matches = (ev: StoreEvent) =>
        end === "" ? ev.kv.key === key : ev.kv.key >= key && (end === "\0" || ev.kv.key < end);
      let next = rev;
      let done = false;
      const finish = (err?: unknown) => {
        if (done) return;
        done = true;
        unlisten();
        signal.removeEventListener("abort", onAbort);
        if (err === undefined) resolve();
        else reject(err);
      };
      const deliver = (revision: number, events: readonly StoreEvent[]) => {
        if (done || revision < next) return;
        next = revision + 1;
        for (const ev of events) if (matches(ev) && onEvent(ev, revision)) return finish();
      };
      const onAbort = () => finish(signal.reason ?? new DOMException("This operation was aborted", "AbortError"));
      const unlisten = member.watch.listen(deliver);
      signal.addEventListener("abort", onAbort, { once: true });
      if (signal.aborted) return onAbort();
      if (rev > 0 && rev < member.store.compactRevision) {
        return finish(new GrpcStatusError(GrpcCode.Unknown, Errors.compacted().message));
      }
      for (const entry of member.store.log) deliver(entry.revision, entry.events);
    });
  }
}
