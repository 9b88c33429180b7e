// The Lambda example's handler against the in-memory etcd, through msw: the handler and its module-scope
// client are used exactly as shipped (global fetch, ETCD_ENDPOINTS), and msw answers for etcd.
// Runs in the `unit` vitest project; virtual time (`mock.advance`) expires leases on demand.
import { setupServer } from "msw/node";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { Etcd } from "../../src/index.js";
import { createMockEtcd } from "../../src/testing/index.js";
import { mswHandlers } from "../../src/testing/msw.js";

// The handler imports the package by name, which resolves to the build (dist/); unit tests run the source.
vi.mock("etcd-edge", () => import("../../src/index.js"));

const BASE = "http://etcd.test:2379";
const mock = createMockEtcd();
const server = setupServer(...mswHandlers(mock, BASE));

interface Result {
  ok: boolean;
  reason?: string;
  fencingToken?: number;
  held?: boolean;
  message?: string;
}
type Handler = (event: { orderId: string; status: string; workMs?: number }, context: LambdaContext) => Promise<Result>;
interface LambdaContext {
  getRemainingTimeInMillis(): number;
}

const previousEndpoints = process.env.ETCD_ENDPOINTS;
/** The gateway paths requested, in order, since the test began. */
let paths: string[] = [];

/** The handler of `file`, from a fresh load of its module (a cold sandbox: a client with no lease yet). */
async function load(file: string): Promise<Handler> {
  vi.resetModules();
  return ((await import(/* @vite-ignore */ file)) as { handler: Handler }).handler;
}

beforeAll(() => {
  server.listen({ onUnhandledFrame: "error" });
  server.events.on("request:start", ({ request }) => void paths.push(new URL(request.url).pathname));
  // The handler reads ETCD_ENDPOINTS when its module loads: set it first, then import.
  process.env.ETCD_ENDPOINTS = BASE;
});

afterAll(() => {
  server.close();
  if (previousEndpoints === undefined) delete process.env.ETCD_ENDPOINTS;
  else process.env.ETCD_ENDPOINTS = previousEndpoints;
});

/** The handler's "lock acquired" log lines, and a hook run synchronously as each is written. */
let acquired: Array<{ orderId: string; fencingToken: number }>;
let onAcquired: (entry: { orderId: string; fencingToken: number }) => void;

beforeEach(() => {
  mock.reset();
  paths = [];
  acquired = [];
  onAcquired = () => {};
  vi.spyOn(console, "log").mockImplementation((line: unknown) => {
    const entry = JSON.parse(String(line));
    if (entry.msg !== "lock acquired") return;
    acquired.push(entry);
    onAcquired(entry);
  });
});

afterEach(() => vi.restoreAllMocks());

/** A Lambda context whose remaining time counts down from `ms`. */
function context(ms: number): LambdaContext {
  const deadline = Date.now() + ms;
  return { getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()) };
}

it("runs the handlers on the SDK's source, not on a build", async () => {
  expect((await import("etcd-edge")).Etcd).toBe(Etcd);
});

/** The lease the handler's client keeps between invocations, holding no key. */
const keptLease = () => expect(mock.leases()).toHaveLength(1);

describe.each(["./handler.mjs", "./handler.ts"])("examples/lambda/%s on the mock", (file) => {
  let handler: Handler;
  beforeEach(async () => {
    handler = await load(file);
  });

  it("processes an order: fenced status write that releases the lock; its lease kept for the next", async () => {
    const result = await handler({ orderId: "42", status: "paid" }, context(15_000));

    expect(result).toEqual({ ok: true, fencingToken: expect.any(Number) });
    expect(acquired).toEqual([{ msg: "lock acquired", orderId: "42", fencingToken: result.fencingToken }]);
    expect(mock.get("orders/42/status")?.value).toBe("paid");
    expect(mock.get("orders/42/token")?.value).toBe(String(result.fencingToken));
    expect(mock.keys("orders/42/lock/")).toEqual([]);
    keptLease();
  });

  it("costs three requests cold (grant, lock, fenced write and release) and two warm", async () => {
    await handler({ orderId: "1", status: "paid" }, context(15_000));
    expect(paths).toEqual(["/v3/lease/grant", "/v3/kv/txn", "/v3/kv/txn"]);
    paths = [];
    await handler({ orderId: "2", status: "paid" }, context(15_000));
    expect(paths).toEqual(["/v3/kv/txn", "/v3/kv/txn"]);
  });

  it("serialises two concurrent invocations for the same order", async () => {
    // When the second invocation gets the lock, the first has written its status and released its key.
    const seen: Array<{ token: number; lockKeys: string[]; statusToken: string | undefined }> = [];
    onAcquired = ({ fencingToken }) =>
      seen.push({
        token: fencingToken,
        lockKeys: mock.keys("orders/7/lock/"),
        statusToken: mock.get("orders/7/token")?.value,
      });

    const [a, b] = await Promise.all([
      handler({ orderId: "7", status: "a", workMs: 300 }, context(15_000)),
      handler({ orderId: "7", status: "b", workMs: 300 }, context(15_000)),
    ]);

    expect(a).toEqual({ ok: true, fencingToken: expect.any(Number) });
    expect(b).toEqual({ ok: true, fencingToken: expect.any(Number) });
    expect(a.fencingToken).not.toBe(b.fencingToken);
    const [first, second] = seen;
    expect(seen).toHaveLength(2);
    expect(second!.token).toBeGreaterThan(first!.token);
    // First in: nothing written yet (the second's key may or may not have joined the line by then).
    expect(first!.lockKeys.length).toBeGreaterThanOrEqual(1);
    expect(first!.statusToken).toBeUndefined();
    // Second in: only its own key is left, and the first's fenced write is in the store.
    expect(second!.lockKeys).toHaveLength(1);
    expect(second!.statusToken).toBe(String(first!.token));
    // The last writer holds the larger token.
    const last = a.fencingToken === second!.token ? "a" : "b";
    expect(mock.get("orders/7/status")?.value).toBe(last);
    expect(mock.get("orders/7/token")?.value).toBe(String(second!.token));
    expect(mock.keys("orders/7/lock/")).toEqual([]);
    keptLease();
  });

  it("gives up with TIMEOUT before the invocation's deadline while another holder keeps the lock", async () => {
    const other = new Etcd({ endpoints: BASE });
    const session = await other.session({ ttl: 60, keepAlive: "manual" });
    try {
      const held = await session.mutex("orders/9/lock").lock();

      const started = performance.now();
      const result = await handler({ orderId: "9", status: "paid" }, context(1_500));
      const elapsed = performance.now() - started;

      expect(result).toMatchObject({ ok: false, reason: "TIMEOUT" });
      // Its budget was 1.5 s minus the 1 s release margin, and it gave up (and cleaned up) within it.
      expect(elapsed).toBeLessThan(1_500);
      expect(acquired).toEqual([]);
      // No key of the handler's is left in the line: only the holder's.
      expect(mock.keys("orders/9/lock/")).toEqual([held.key]);
      expect(mock.get("orders/9/status")).toBeUndefined();
      await held.unlock();
    } finally {
      await session.close();
    }
  });

  it("answers LOCK_LOST when its lease expires mid-work, and writes nothing", async () => {
    // Virtual time: the lease (TTL 5 s) expires on the mock while the handler works; its renewal then
    // finds the lease gone, and the fenced write is refused.
    onAcquired = () => mock.advance(6_000);

    const result = await handler({ orderId: "13", status: "paid", workMs: 2_000 }, context(15_000));

    expect(acquired).toHaveLength(1);
    expect(result).toEqual({ ok: false, reason: "LOCK_LOST", fencingToken: acquired[0]!.fencingToken, held: false });
    expect(mock.get("orders/13/status")).toBeUndefined();
    expect(mock.get("orders/13/token")).toBeUndefined();
    expect(mock.keys("orders/13/lock/")).toEqual([]);
  });
});
