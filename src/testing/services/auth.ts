import { Errors } from "../wire/errors.js";
import { setInt, type Out } from "../wire/encode.js";
import { str } from "../wire/message.js";
import { messageSize } from "../wire/proto-size.js";
import { AuthenticateRequest, Empty } from "../wire/schema.js";
import { RaftField } from "./kv.js";
import { unary } from "./route.js";

export const authRoutes = {
  "/v3/auth/authenticate": unary(AuthenticateRequest, (member, call) => {
    if (!member.auth) throw Errors.authNotEnabled();
    const token = member.auth.authenticate(str(call.msg, "name"), str(call.msg, "password"));
    member.propose(messageSize(call.msg), RaftField.authenticate);
    return { header: member.header(), token };
  }),
  /**
   * From 3.5: applied through raft; an admin call once auth is on (root's alone) until 3.7, which answers any
   * caller whose token (if any) is valid.
   */
  "/v3/auth/status": unary(Empty, (member, call) => {
    member.propose(messageSize(call.msg), RaftField.authStatus, call);
    if (member.auth) {
      const user = member.user(call);
      if (member.dialect.authStatusNeedsAdmin) {
        if (user === undefined) throw Errors.userEmpty();
        if (!member.auth.isAdmin(user)) throw Errors.permissionDenied();
      }
    }
    const out: Out = { header: member.header() };
    if (member.auth) out.enabled = true;
    setInt(out, "authRevision", member.auth?.revision ?? 1);
    return out;
  }),
};
