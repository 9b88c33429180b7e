// examples/workers itself: the packed etcd-edge bundled with the example Worker as for Cloudflare (no
// nodejs_compat) and served by workerd against real etcd, through a relay that records every gateway request the
// isolate sends. One isolate serves every request with its module-scope client, as a deployed Worker does: a warm
// withLock costs two requests on the shared lease, with auth on the isolate authenticates once, concurrent
// requests on one order serialise with no lost update, and workerd reports no cross-request I/O.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../support/async.js";
import { addUser, enableAuth, startEtcd } from "../support/etcd-members.js";
import { etcdBinaries } from "../support/etcd-versions.js";
import { send } from "../support/raw-gateway.js";
import {
  bundleWorker,
  ensureRuntime,
  etcdEndpoint,
  INSTALL_TIMEOUT_MS,
  project,
  type RecordingRelay,
  recordingRelay,
  startWorkerd,
  uniquePrefix,
  workDir,
  workerdConfig,
  writeText,
  type WorkerdServer,
} from "../support/runtimes.js";
import { b64, prefixEnd, unb64 } from "../support/wire.js";

const example = join(import.meta.dirname, "../../examples/workers");
const wrangler = readFileSync(join(example, "wrangler.toml"), "utf8");
const compatibilityDate = /^compatibility_date\s*=\s*"([^"]+)"/m.exec(wrangler)![1]!;
/** From this date on, Workers' fetch goes to the URL's port (flag allow_custom_ports); before it, to 80 or 443. */
const CUSTOM_PORTS_SINCE = "2024-09-02";
/**
 * From this date on, a promise settles in the request that made it (flag handle_cross_request_promise_resolution).
 * Before it (2024-10-13, or 2026-11-01 with no_handle_cross_request_promise_resolution), workerd served 8 requests
 * at once on one name through the isolate's client, then 3 in turn: the first took the lock, every other one's wait
 * ended in TIMEOUT.
 */
const CROSS_REQUEST_PROMISES_SINCE = "2024-10-14";
/** What workerd prints when a Worker's I/O or promises cross from one request to another, or a request hangs. */
const WORKERD_COMPLAINT =
  /different request|cross-request|uncaught|unhandled|hanging promise|hung|exception|canceled|cancelled/i;

const ROOT_PASSWORD = "root-password";
const USER = { user: "orders", password: "orders-password" };
const AUTHENTICATE = "/v3/auth/authenticate";

/** The example served by a workerd of its own (one isolate), and the relay in front of its etcd. */
interface Served {
  server: WorkerdServer;
  relay: RecordingRelay;
  /** The member itself, for the test's own reads (not through the relay). */
  member: string;
  /** Headers of the test's own reads (a root token when auth is on). */
  headers: Record<string, string>;
}

interface Answer {
  status: number;
  body: { ok: boolean; fencingToken: number; updates: number; reason?: string };
}

describe("examples/workers in workerd", () => {
  const started: Array<() => Promise<void>> = [];
  let workerd: string;
  let dir: string;
  let plain: Served;
  /** A second isolate on the same member, as Workers run many. */
  let other: Served;
  let authed: Served;

  /** Serves the example in a workerd of its own, its etcd behind a recording relay. */
  const serve = async (
    name: string,
    member: string,
    options: { vars?: Record<string, string>; headers?: Record<string, string> } = {},
  ): Promise<Served> => {
    const relay = await recordingRelay(member);
    started.push(() => relay.close());
    const config = join(dir, `${name}.capnp`);
    writeText(config, workerdConfig(relay.url, compatibilityDate, [], options.vars));
    // The example answers 400 to a request without ?order=: that is how we know it is serving.
    const server = await startWorkerd(workerd, config, dir, (status) => status === 400);
    started.push(() => server.stop());
    return { server, relay, member, headers: options.headers ?? {} };
  };

  beforeAll(async () => {
    workerd = await ensureRuntime("workerd");
    dir = workDir("workers-example");
    writeText(join(project(), "workers-example.mjs"), readFileSync(join(example, "src/index.js"), "utf8"));
    await bundleWorker(dir, "workers-example.mjs");
    plain = await serve("plain", etcdEndpoint());
    other = await serve("other", etcdEndpoint());

    const authMember = await startEtcd({ name: "workers-auth", binDir: etcdBinaries("3.4").binDir });
    started.push(() => authMember.stop());
    await enableAuth(authMember, { rootPassword: ROOT_PASSWORD });
    await addUser(authMember, { rootPassword: ROOT_PASSWORD, ...USER, prefix: "orders/" });
    const root = await send(authMember.clientUrl, AUTHENTICATE, { name: "root", password: ROOT_PASSWORD });
    const rootToken = (JSON.parse(root.text) as { token: string }).token;
    authed = await serve("auth", authMember.clientUrl, {
      vars: { ETCD_USERNAME: USER.user, ETCD_PASSWORD: USER.password },
      headers: { authorization: rootToken },
    });
  }, INSTALL_TIMEOUT_MS);

  afterAll(async () => {
    for (const stop of started.reverse()) await stop();
  });

  /** Asks the Worker to record `status` for `order`. */
  const update = async (served: Served, order: string, status: string) => {
    const response = await fetch(`${served.server.url}/?order=${order}&status=${status}`, {
      signal: AbortSignal.timeout(30_000),
    });
    return { status: response.status, body: (await response.json()) as Answer["body"] };
  };

  /** The order as etcd holds it, and the keys left in its lock's line. */
  const stored = async (served: Served, order: string) => {
    const read = async (key: string, prefix: boolean) => {
      const body = prefix ? { key: b64(key), range_end: prefixEnd(key) } : { key: b64(key) };
      const answer = await send(served.member, "/v3/kv/range", body, { headers: served.headers });
      expect(answer.status, answer.text).toBe(200);
      return ((JSON.parse(answer.text) as { kvs?: Array<{ key: string; value?: string }> }).kvs ?? []).map((kv) => ({
        key: unb64(kv.key),
        value: unb64(kv.value),
      }));
    };
    const [kv] = await read(`orders/${order}`, false);
    const history = kv === undefined ? [] : (JSON.parse(kv.value) as { history: string[] }).history;
    return { history, lockKeys: (await read(`orders/${order}/lock/`, true)).map((entry) => entry.key) };
  };

  /**
   * Waits until the last release (sent after the response, through waitUntil) has landed and every answer has
   * gone back through the relay: from then on the relay's record is complete.
   */
  const settled = (served: Served, order: string) =>
    until("the releases landed", 10_000, async () => {
      const { lockKeys } = await stored(served, order);
      return lockKeys.length === 0 && served.relay.inFlight() === 0;
    });

  /** A name of an order no other test uses. */
  const newOrder = () => uniquePrefix("workers-example").replace(/\W/g, "-");

  /** Requests `count` updates of `order` at once (statuses `<label>0`...), each answered 200. */
  const atOnce = async (served: Served, order: string, label: string, count: number) => {
    const statuses = Array.from({ length: count }, (_, i) => `${label}${i}`);
    const answers = await Promise.all(statuses.map((status) => update(served, order, status)));
    for (const answer of answers)
      expect(answer, served.server.output()).toMatchObject({ status: 200, body: { ok: true } });
    return statuses.map((status, i) => ({ status, ...answers[i]!.body }));
  };

  /**
   * Requests updates of `order` one after the other, each answered 200, each once the release of the one before
   * (sent after its response, through waitUntil) has landed: a request that came sooner would find that key
   * still in the line and wait for its delete, as any contender does (one watch event).
   */
  const inTurn = async (served: Served, order: string, label: string, count: number) => {
    for (let i = 0; i < count; i++) {
      const answer = await update(served, order, `${label}${i}`);
      expect(answer, served.server.output()).toMatchObject({ status: 200, body: { ok: true } });
      await settled(served, order);
    }
  };

  it("wrangler.toml: a compatibility date that keeps a custom port such as :2379, no compatibility flag", () => {
    expect(compatibilityDate >= CUSTOM_PORTS_SINCE, compatibilityDate).toBe(true);
    expect(compatibilityDate >= CROSS_REQUEST_PROMISES_SINCE, compatibilityDate).toBe(true);
    // Past that date, naming allow_custom_ports is refused by `wrangler deploy`; nodejs_compat is not needed.
    expect(wrangler).not.toMatch(/^compatibility_flags\b/m);
  });

  it("serialises concurrent updates of one order in two isolates: each sees the last, no write lost", async () => {
    const order = newOrder();
    // Within an isolate the requests queue on its client; between isolates, on etcd.
    const answers = (await Promise.all([atOnce(plain, order, "a", 8), atOnce(other, order, "b", 8)])).flat();
    await Promise.all([settled(plain, order), settled(other, order)]);
    const inOrder = [...answers].sort((a, b) => a.fencingToken - b.fencingToken);
    // Each request read the history its predecessor under the lock wrote, and added one entry to it.
    expect(inOrder.map((answer) => answer.updates)).toEqual(inOrder.map((_, i) => i + 1));
    expect((await stored(plain, order)).history).toEqual(inOrder.map((answer) => answer.status));
    expect(plain.server.output()).not.toMatch(WORKERD_COMPLAINT);
    expect(other.server.output()).not.toMatch(WORKERD_COMPLAINT);
  });

  it("a warm withLock costs two gateway requests, take and release, on the isolate's shared lease", async () => {
    const order = newOrder();
    await inTurn(plain, order, "warm", 1);
    await settled(plain, order);
    const before = plain.relay.paths().length;
    await inTurn(plain, order, "s", 3);
    await settled(plain, order);
    const sent = plain.relay.paths().slice(before);
    // Per request: the take and the release (kv/txn each), and the handler's own read and fenced write. No
    // grant, no revocation, no renewal.
    expect(countByPath(sent), sent.join("\n")).toEqual({ "/v3/kv/range": 3, "/v3/kv/txn": 3 * 3 });
    expect((await stored(plain, order)).history).toEqual(["warm0", "s0", "s1", "s2"]);
    expect(plain.server.output()).not.toMatch(WORKERD_COMPLAINT);
  });

  it("with auth on, one authenticate for 20 requests: 12 at once on one order, then 8 in turn", async () => {
    const order = newOrder();
    await atOnce(authed, order, "c", 12);
    await settled(authed, order);
    const before = authed.relay.paths().length;
    await inTurn(authed, order, "s", 8);
    await settled(authed, order);
    const paths = authed.relay.paths();
    expect(
      paths.filter((path) => path === AUTHENTICATE),
      authed.server.output(),
    ).toHaveLength(1);
    // The turns after the rush are warm: two requests of withLock's, two of the handler's, nothing else.
    expect(countByPath(paths.slice(before))).toEqual({ "/v3/kv/range": 8, "/v3/kv/txn": 8 * 3 });
    expect((await stored(authed, order)).history).toHaveLength(20);
    expect(authed.server.output()).not.toMatch(WORKERD_COMPLAINT);
  });
});

function countByPath(paths: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const path of paths) counts[path] = (counts[path] ?? 0) + 1;
  return counts;
}
