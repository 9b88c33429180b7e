import type { Caller, Member } from "../member.js";
import { binToBase64 } from "../wire/bytes.js";
import { setInt, setList, type Out } from "../wire/encode.js";
import { Errors, GrpcStatusError } from "../wire/errors.js";
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

/**
 * Grants a lease as etcd's server does: an ID from the request ID generator when none was asked for, drawn before
 * the caller's token is looked at.
 */
export function grantLease(
  member: Member,
  requestedId: bigint,
  ttl: number,
  caller?: Caller,
): { id: bigint; ttl: number } {
  const id = requestedId === 0n ? member.nextLeaseId() : requestedId;
  if (caller) member.leaseUser(caller);
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

function keepAliveOnce(member: Member, caller: Caller, msg: Msg): Out {
  const id = int(msg, "ID");
  // Before 3.6 a renewal never looks at the token, not even a bad one.
  if (member.dialect.rbac.leaseCalls) member.checkLeaseKeys(member.leaseUser(caller), member.lessor.get(id), true);
  const lease = member.lessor.renew(id);
  const result: Out = { header: member.header() };
  setInt(result, "ID", id);
  if (lease) setInt(result, "TTL", lease.ttl);
  return result;
}

/**
 * One answer line per request in the body, sent once the body has ended, then the end of the stream. A refused
 * renewal ends the stream: as the answer's status when it is the first (the throw), else as its last line.
 */
const keepAlive: BidiRoute = {
  kind: "bidi",
  request: () => LeaseKeepAliveRequest,
  incremental: false,
  open(member, caller) {
    const out = new LineStream();
    return {
      receive(msg) {
        if (out.closed) return;
        try {
          out.result(keepAliveOnce(member, caller, msg));
        } catch (err) {
          if (!(err instanceof GrpcStatusError) || out.lines === 0) throw err;
          out.error(member.dialect.streamErrorLine(err.code, err.message));
          out.close();
        }
      },
      end: () => out.close(),
      body: out.body,
    };
  },
};

export const leaseRoutes = {
  "/v3/lease/grant": unary(LeaseGrantRequest, (member, call) => {
    const lease = grantLease(member, int(call.msg, "ID"), num(call.msg, "TTL"), call);
    const out: Out = { header: member.header() };
    setInt(out, "ID", lease.id);
    setInt(out, "TTL", lease.ttl);
    return out;
  }),
  "/v3/lease/revoke": unary(LeaseRevokeRequest, (member, call) => {
    const user = member.leaseUser(call);
    member.propose(messageSize(call.msg), RaftField.leaseRevoke, call);
    const lease = member.lessor.require(int(call.msg, "ID"));
    member.checkLeaseKeys(user, lease, true);
    member.revokeLease(lease);
    return { header: member.header() };
  }),
  "/v3/lease/keepalive": keepAlive,
  "/v3/lease/timetolive": unary(LeaseTimeToLiveRequest, (member, call) => {
    const id = int(call.msg, "ID");
    const lease = member.lessor.get(id);
    const { leaseCalls, leaseKeysRead } = member.dialect.rbac;
    const listsKeys = bool(call.msg, "keys") && leaseKeysRead;
    // Before 3.6 only the listing of keys looks at the token (from 3.5), and then wants one.
    if (leaseCalls || listsKeys) {
      const user = member.leaseUser(call);
      if (listsKeys && member.auth && user === undefined) throw Errors.userEmpty();
      if (listsKeys) member.checkLeaseKeys(user, lease, false);
    }
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
    // Before 3.6 a listing never looks at the token.
    if (member.dialect.rbac.leaseCalls) {
      const user = member.leaseUser(call);
      for (const lease of member.lessor.list()) member.checkLeaseKeys(user, lease, false);
    }
    const out: Out = { header: member.header() };
    setList(
      out,
      "leases",
      member.lessor.list().map((l) => ({ ID: String(l.id) })),
    );
    return out;
  }),
};
