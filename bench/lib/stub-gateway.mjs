// A fetch that answers at once with canned gateway bodies (the JSON etcd 3.4 sends for the requests of
// an uncontended lock on one name and lease: the join into an empty line answers with its put alone), so
// the client's own CPU cost can be measured without a network. Bodies are built once; picking one costs a
// path test and one substring test.
import { b64 } from "./raw-lock.mjs";

export function stubGateway({ name, leaseId = "7587899071857085703", ttl = 30 }) {
  const key = b64(`${name}/${BigInt(leaseId).toString(16)}`);
  const header =
    '"header":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437","revision":"42","raft_term":"2"}';
  const kv = `{"key":"${key}","create_revision":"42","mod_revision":"42","version":"1","lease":"${leaseId}"}`;
  const bodies = {
    lock: `{${header},"succeeded":true,"responses":[{"response_put":{"header":{"revision":"42"}}}]}`,
    unlock:
      `{${header},"succeeded":true,` +
      `"responses":[{"response_delete_range":{"header":{"revision":"43"},"deleted":"1"}}]}`,
    grant: `{${header},"ID":"${leaseId}","TTL":"${ttl}"}`,
    revoke: `{${header}}`,
    keepalive: `{"result":{${header},"ID":"${leaseId}","TTL":"${ttl}"}}\n`,
    timetolive: `{${header},"ID":"${leaseId}","TTL":"${ttl}","grantedTTL":"${ttl}"}`,
    range: `{${header},"kvs":[${kv}],"count":"1"}`,
  };
  const answer = (body, status = 200) => ({ status, body: null, text: () => Promise.resolve(body) });
  const responses = Object.fromEntries(Object.entries(bodies).map(([what, body]) => [what, answer(body)]));
  const unknown = answer(
    '{"error":"the bench stub has no answer for this request","code":12,"message":"unimplemented"}',
    501,
  );
  /** The canned answer, or one naming the lease ID the request asked for when it names one. */
  const withId = (canned, body, make) => {
    const id = /"ID":"?(\d+)/.exec(body ?? "")?.[1];
    return id === undefined || id === leaseId ? canned : answer(make(id));
  };
  let requests = 0;
  const fetch = async (url, init) => {
    requests++;
    const path = url.slice(url.indexOf("/v3/"));
    switch (path) {
      case "/v3/kv/txn":
        return init.body.includes('"request_put"') ? responses.lock : responses.unlock;
      case "/v3/kv/range":
        return responses.range;
      case "/v3/lease/grant":
        // A session draws its lease's ID and checks the answer names it.
        return withId(responses.grant, init.body, (id) => `{${header},"ID":"${id}","TTL":"${ttl}"}`);
      case "/v3/lease/revoke":
        return responses.revoke;
      case "/v3/lease/keepalive":
        return withId(responses.keepalive, init.body, (id) => `{"result":{${header},"ID":"${id}","TTL":"${ttl}"}}\n`);
      case "/v3/lease/timetolive":
        return responses.timetolive;
      default:
        return unknown;
    }
  };
  return { fetch, bodies, requests: () => requests };
}
