import type { Member } from "../member.js";
import type { KvResult } from "../kv.js";
import { parseDelete, parsePut, parseRange, parseTxn } from "../ops.js";
import type { Out } from "../wire/encode.js";
import { num } from "../wire/message.js";
import { messageSize } from "../wire/proto-size.js";
import { CompactionRequest, DeleteRangeRequest, PutRequest, RangeRequest, TxnRequest } from "../wire/schema.js";
import { unary, type Call } from "./route.js";

/** InternalRaftRequest field numbers of the requests raft carries. */
export const RaftField = {
  put: 4,
  deleteRange: 5,
  txn: 6,
  compaction: 7,
  leaseGrant: 8,
  leaseRevoke: 9,
  authenticate: 1012,
  authStatus: 1013,
} as const;

function withHeader(member: Member, r: KvResult): Out {
  const { header: _nested, ...rest } = r.body;
  return { header: member.header(r.revision), ...rest };
}

const proposer = (member: Member, call: Call, field: number) => () =>
  member.propose(messageSize(call.msg), field, call);

export const kvRoutes = {
  "/v3/kv/range": unary(RangeRequest, (member, call) => {
    const op = parseRange(call.msg);
    member.checkOp(call, op);
    return withHeader(member, member.kv.range(op));
  }),
  "/v3/kv/put": unary(PutRequest, (member, call) => {
    const op = parsePut(call.msg);
    member.checkOp(call, op);
    return withHeader(member, member.kv.put(op, proposer(member, call, RaftField.put)));
  }),
  "/v3/kv/deleterange": unary(DeleteRangeRequest, (member, call) => {
    const op = parseDelete(call.msg);
    member.checkOp(call, op);
    return withHeader(member, member.kv.deleteRange(op, proposer(member, call, RaftField.deleteRange)));
  }),
  "/v3/kv/txn": unary(TxnRequest, (member, call) => {
    const op = parseTxn(call.msg);
    member.checkOp(call, op);
    return withHeader(member, member.kv.txn(op, proposer(member, call, RaftField.txn)));
  }),
  "/v3/kv/compaction": unary(CompactionRequest, (member, call) => {
    member.user(call);
    member.propose(messageSize(call.msg), RaftField.compaction, call);
    member.store.compact(num(call.msg, "revision"));
    return { header: member.header() };
  }),
};
