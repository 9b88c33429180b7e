import type { Caller, Member } from "../member.js";
import type { WatchSpec } from "../watch.js";
import { Errors } from "../wire/errors.js";
import { bin, bool, int, list, num, oneofCase, sub, type Msg } from "../wire/message.js";
import { WatchRequest } from "../wire/schema.js";
import type { BidiRoute } from "./route.js";

/** The create request as etcd's watch server normalises it: no key is "\0", a "\0" end means "every key from here". */
function watchSpec(create: Msg): WatchSpec {
  const key = bin(create, "key");
  const end = bin(create, "range_end");
  const filters = list(create, "filters");
  return {
    key: key === "" ? "\0" : key,
    end,
    startRevision: num(create, "start_revision"),
    prevKv: bool(create, "prev_kv"),
    noPut: filters.includes(0),
    noDelete: filters.includes(1),
    progressNotify: bool(create, "progress_notify"),
    watchId: int(create, "watch_id"),
  };
}

/**
 * Why a create request is canceled before it starts, if it is: from 3.6 a negative start revision, then auth
 * failures, both as a canceled create response (HTTP 200) with the reason as text.
 */
function refusal(member: Member, caller: Caller, spec: WatchSpec): string | undefined {
  if (spec.startRevision < 0 && member.dialect.refusesNegativeWatchStart) return Errors.compacted().message;
  if (!member.auth) return undefined;
  try {
    const user = member.user(caller);
    member.auth.check(user, spec.key, spec.end, false);
    return undefined;
  } catch (err) {
    const e = err as { code: number; message: string };
    const name = { 3: "InvalidArgument", 7: "PermissionDenied", 16: "Unauthenticated" }[e.code] ?? "Unknown";
    return `rpc error: code = ${name} desc = ${e.message}`;
  }
}

/**
 * /v3/watch: each JSON value of the body is a create, cancel or progress request on one stream. The stream
 * stays open after the body ends, until the client goes away.
 */
export const watchRoute: BidiRoute = {
  kind: "bidi",
  request: () => WatchRequest,
  incremental: true,
  open(member, caller, signal) {
    const stream = member.watch.open(signal);
    return {
      receive(msg) {
        switch (oneofCase(msg, "etcdserverpb.WatchRequest.request_union")) {
          case "create_request": {
            const spec = watchSpec(sub(msg, "create_request")!);
            stream.create(spec, refusal(member, caller, spec));
            break;
          }
          case "cancel_request":
            stream.cancel(int(sub(msg, "cancel_request")!, "watch_id"));
            break;
          case "progress_request":
            stream.progressRequest();
            break;
        }
      },
      end() {},
      body: stream.body,
    };
  },
};
