import { Errors } from "../wire/errors.js";
import { str } from "../wire/message.js";
import { messageSize } from "../wire/proto-size.js";
import { AuthenticateRequest } from "../wire/schema.js";
import { RaftField } from "./kv.js";
import { unary } from "./route.js";

export const authRoutes = {
  "/v3/auth/authenticate": unary(AuthenticateRequest, (member, call) => {
    if (!member.auth) throw Errors.authNotEnabled();
    const token = member.auth.authenticate(str(call.msg, "name"), str(call.msg, "password"));
    member.propose(messageSize(call.msg), RaftField.authenticate);
    return { header: member.header(), token };
  }),
};
