import type { Member } from "../member.js";
import { binToBase64, prefixEnd, type BinKey } from "../wire/bytes.js";
import { encodeKv, setInt, type Out } from "../wire/encode.js";
import { GrpcCode, GrpcStatusError } from "../wire/errors.js";
import { bin, bytes, int, sub, type Msg } from "../wire/message.js";
import { CampaignRequest, LeaderRequest, ProclaimRequest, ResignRequest } from "../wire/schema.js";
import { InProcessClient, revisionOf, topOf } from "./client.js";
import { campaign, leaderOf, proclaim, resign, sessionLease, type LeaderKey } from "./concurrency.js";
import { LineStream, unary, type ServerStreamRoute } from "./route.js";
import type { KeyValue } from "../store.js";

/** The `leader` field of proclaim and resign; etcd refuses a request without one. */
function leaderKey(msg: Msg): LeaderKey {
  const leader = sub(msg, "leader");
  if (!leader) throw new GrpcStatusError(GrpcCode.Unknown, '"leader" field must be provided');
  return {
    name: bin(leader, "name"),
    key: bin(leader, "key"),
    rev: Number(int(leader, "rev")),
    lease: int(leader, "lease"),
  };
}

function leaderOut(l: LeaderKey): Out {
  const out: Out = {};
  if (l.name !== "") out.name = binToBase64(l.name);
  if (l.key !== "") out.key = binToBase64(l.key);
  setInt(out, "rev", l.rev);
  setInt(out, "lease", l.lease);
  return out;
}

/**
 * Election.Observe: the current leader, then every proclamation, then (once its key is deleted) the next leader;
 * when nobody leads, the first candidate to put a key. One NDJSON line each, until the client leaves.
 */
async function observe(member: Member, name: BinKey, out: LineStream, signal: AbortSignal): Promise<void> {
  const client = new InProcessClient(member, signal);
  const prefix = `${name}/`;
  while (!signal.aborted && !out.closed) {
    const first = client.get(topOf(prefix, "first"));
    let header = first.header;
    let kv: KeyValue | undefined;
    if (!first.kvs[0]) {
      // Wait for the first put under the prefix; its header says the put's own revision.
      await client.watch(prefix, prefixEnd(prefix), revisionOf(first.header), (ev, revision) => {
        if (ev.type !== "PUT") return false;
        kv = ev.kv;
        header = member.header(revision);
        (header as { revision?: string }).revision = String(ev.kv.modRevision);
        return true;
      });
      out.result({ header, kv: encodeKv(kv!) });
    } else {
      out.result({ header, kv: first.kvs[0].out });
    }
    const key = kv?.key ?? first.kvs[0]!.key;
    await client.watch(key, "", revisionOf(header) + 1, (ev, revision) => {
      if (ev.type === "DELETE") return true;
      out.result({ header: member.header(revision), kv: encodeKv(ev.kv) });
      return false;
    });
  }
}

const observeRoute: ServerStreamRoute = {
  kind: "server-stream",
  request: () => LeaderRequest,
  open(member, call) {
    member.user(call);
    const out = new LineStream();
    observe(member, bin(call.msg, "name"), out, call.signal).catch(() => out.close());
    return out.body;
  },
};

/** etcd's v3election service, with the key layout and requests of Go's concurrency.Election. */
export const electionRoutes = {
  "/v3/election/campaign": unary(CampaignRequest, async (member, call) => {
    member.user(call);
    const client = new InProcessClient(member, call.signal);
    const lease = sessionLease(client, int(call.msg, "lease"));
    const { header, leader } = await campaign(client, bin(call.msg, "name"), lease, bytes(call.msg, "value"));
    return { header, leader: leaderOut(leader) };
  }),
  "/v3/election/proclaim": unary(ProclaimRequest, (member, call) => {
    member.user(call);
    const leader = leaderKey(call.msg);
    const client = new InProcessClient(member, call.signal);
    // ResumeElection on a session of the given lease: a lease of 0 means a fresh 60 s lease, as in etcd.
    leader.lease = sessionLease(client, leader.lease);
    return { header: proclaim(client, leader, bytes(call.msg, "value")) };
  }),
  "/v3/election/leader": unary(LeaderRequest, (member, call) => {
    member.user(call);
    const { header, kv } = leaderOf(new InProcessClient(member, call.signal), bin(call.msg, "name"));
    return { header, kv: kv.out };
  }),
  "/v3/election/observe": observeRoute,
  "/v3/election/resign": unary(ResignRequest, (member, call) => {
    member.user(call);
    const leader = leaderKey(call.msg);
    const client = new InProcessClient(member, call.signal);
    leader.lease = sessionLease(client, leader.lease);
    return { header: resign(client, leader) };
  }),
};
