import type { Caller, Member } from "../member.js";
import { binToBase64 } from "../wire/bytes.js";
import { setInt, setList, type Out } from "../wire/encode.js";
import { bool, int, num, type Msg } from "../wire/message.js";
import { messageSize } from "../wire/proto-size.js";
import {
  Empty,
  LeaseGrantRequest,
  LeaseKeepAliveRequest,
  LeaseRevokeRequest,
  LeaseTimeToLiveRequest,
} from "../wire/schema.js";
import { RaftField } from "./kv.js";
import { LineStream, unary, type BidiRoute } from "./route.js";

/** Grants a lease as etcd's server does: an ID from the request ID generator when none was asked for. */
export function grantLease(
  member: Member,
  requestedId: bigint,
  ttl: number,
  caller?: Caller,
): { id: bigint; ttl: number } {
  const id = requestedId === 0n ? member.nextLeaseId() : requestedId;
  // The proposal carries the chosen ID, so its size counts it.
  const size = messageSize({
    type: LeaseGrantRequest,
    fields: new Map<string, bigint>([
      ["TTL", BigInt(ttl)],
      ["ID", id],
    ]),
  });
  member.propose(size, RaftField.leaseGrant, caller);
  const lease = member.lessor.grant(id, ttl);
  // Granted inside a lock that may wait for long: arm the wall clock now, not when the request ends.
  member.rearm();
  return { id: lease.id, ttl: lease.ttl };
}

function keepAliveOnce(member: Member, msg: Msg): Out {
  const id = int(msg, "ID");
  const lease = member.lessor.renew(id);
  const result: Out = { header: member.header() };
  setInt(result, "ID", id);
  if (lease) setInt(result, "TTL", lease.ttl);
  return result;
}

/** One answer line per request in the body, sent once the body has ended, then the end of the stream. */
const keepAlive: BidiRoute = {
  kind: "bidi",
  request: () => LeaseKeepAliveRequest,
  incremental: false,
  open(member, caller) {
    const out = new LineStream();
    return {
      receive(msg) {
        member.user(caller);
        out.result(keepAliveOnce(member, msg));
      },
      end: () => out.close(),
      body: out.body,
    };
  },
};

export const leaseRoutes = {
  "/v3/lease/grant": unary(LeaseGrantRequest, (member, call) => {
    member.user(call);
    const lease = grantLease(member, int(call.msg, "ID"), num(call.msg, "TTL"), call);
    const out: Out = { header: member.header() };
    setInt(out, "ID", lease.id);
    setInt(out, "TTL", lease.ttl);
    return out;
  }),
  "/v3/lease/revoke": unary(LeaseRevokeRequest, (member, call) => {
    const user = member.user(call);
    member.propose(messageSize(call.msg), RaftField.leaseRevoke, call);
    const lease = member.lessor.require(int(call.msg, "ID"));
    if (member.auth) for (const key of lease.keys) member.auth.check(user, key, "", true);
    member.revokeLease(lease);
    return { header: member.header() };
  }),
  "/v3/lease/keepalive": keepAlive,
  "/v3/lease/timetolive": unary(LeaseTimeToLiveRequest, (member, call) => {
    member.user(call);
    const id = int(call.msg, "ID");
    const lease = member.lessor.get(id);
    const out: Out = { header: member.header() };
    setInt(out, "ID", id);
    if (!lease) {
      out.TTL = "-1";
      return out;
    }
    setInt(out, "TTL", member.lessor.remaining(lease));
    setInt(out, "grantedTTL", lease.ttl);
    // etcd lists the keys from a Go map, in no defined order; the mock sorts them.
    if (bool(call.msg, "keys")) setList(out, "keys", [...lease.keys].sort().map(binToBase64));
    return out;
  }),
  "/v3/lease/leases": unary(Empty, (member, call) => {
    member.user(call);
    const out: Out = { header: member.header() };
    setList(
      out,
      "leases",
      member.lessor.list().map((l) => ({ ID: String(l.id) })),
    );
    return out;
  }),
};
