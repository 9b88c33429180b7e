import { setInt, type Out } from "../wire/encode.js";
import type { Dialect } from "../wire/dialect.js";
import { Empty, MemberListRequest } from "../wire/schema.js";
import { unary } from "./route.js";

/** A fresh member's database sizes: the mock keeps no file, so these stay put. */
const DB_SIZE = "20480";
const DB_SIZE_IN_USE = "16384";

/** /v3/maintenance/status and /v3/cluster/member/list for the mock's single member, which is always the leader. */
export const memberInfoRoutes = {
  "/v3/maintenance/status": unary(Empty, (member) => {
    const out: Out = { header: member.header(), version: member.dialect.versions.etcdserver, dbSize: DB_SIZE };
    setInt(out, "leader", member.options.memberId);
    setInt(out, "raftIndex", member.raftIndex);
    setInt(out, "raftTerm", member.raftTerm);
    setInt(out, "raftAppliedIndex", member.raftIndex);
    out.dbSizeInUse = DB_SIZE_IN_USE;
    return { ...out, ...member.dialect.statusExtras };
  }),
  "/v3/cluster/member/list": {
    ...unary(MemberListRequest, (member) => {
      // The header of a member list carries no revision.
      const { revision: _revision, ...header } = member.header();
      const self: Out = { ID: String(member.options.memberId), name: member.options.name };
      if (member.options.peerUrls.length > 0) self.peerURLs = [...member.options.peerUrls];
      if (member.options.clientUrls.length > 0) self.clientURLs = [...member.options.clientUrls];
      return { header, members: [self] };
    }),
    request: (dialect: Dialect) => dialect.memberListRequest,
  },
};
