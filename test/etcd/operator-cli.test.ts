// The operator's command, `npx etcd-edge locks …` (issue 40), run in-process (runCli, as the bin runs it) against
// real etcd: who holds what and who waits, revoke and request-release, live changes, `--json` for scripts, the
// documented exit codes, endpoints and a user from flags or etcdctl's environment variables. The packed bin
// itself runs in test/runtimes/operator-cli.test.ts.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { Session } from "../../src/index.js";
import { sleep, until } from "../support/async.js";
import { runCaptured } from "../support/cli.js";
import { client, leaseHex, sharedEndpoint, uniqueName } from "../support/etcd.js";
import { addUser, enableAuth } from "../support/etcd-members.js";
import { startEtcd } from "./harness.js";

const etcd = client();
const sessions: Session[] = [];

afterEach(async () => {
  await Promise.all(sessions.map((s) => s.close().catch(() => {})));
  sessions.length = 0;
});

async function newSession(on = etcd): Promise<Session> {
  const session = await on.session({ ttl: 30 });
  sessions.push(session);
  return session;
}

/** Runs one command line; its exit code and what it printed. */
function cli(args: string[], env: Record<string, string> = {}, signal?: AbortSignal) {
  return runCaptured(args, { ETCDCTL_ENDPOINTS: sharedEndpoint(), ...env }, signal);
}

describe("npx etcd-edge locks", () => {
  it("inspect: the holder (token, lease in hex, TTL left) and the waiters in order, as text and --json", async () => {
    const name = uniqueName("cli");
    const holder = await newSession();
    const lock = await holder.mutex(name).lock();
    const waiter = await newSession();
    const waiting = waiter.mutex(name).lock({ timeout: 20_000 });
    await until("the waiter joined", 5_000, async () => (await etcd.inspectLock(name)).waiters.length === 1);

    const text = await cli(["locks", "inspect", name]);
    expect(text.code).toBe(0);
    expect(text.out).toContain(`${name}: mutex`);
    expect(text.out).toMatch(
      new RegExp(`holder {2}${lock.key} {2}token ${lock.revision} .*lease ${leaseHex(holder.leaseId)}, \\d+ s left`),
    );
    expect(text.out).toMatch(/waiter 1 {2}/);

    const json = await cli(["locks", "inspect", name, "--json"]);
    const view = JSON.parse(json.out);
    expect(view).toMatchObject({ name, kind: "mutex", holders: [{ key: lock.key, token: lock.revision }] });
    expect(view.holders[0].lease).toBe(leaseHex(holder.leaseId));
    expect(view.holders[0].ttl).toBeGreaterThan(20);
    expect(view.waiters).toHaveLength(1);
    expect(view.waiters[0].lease).toBe(leaseHex(waiter.leaseId));
    await lock.unlock();
    await (await waiting).unlock();
    expect(JSON.parse((await cli(["locks", "inspect", name, "--json"])).out)).toEqual({ name, free: true });
  });

  it("ls: every line under a prefix, by kind, with holders, waiters and the holder's token", async () => {
    const prefix = `${uniqueName("cli-ls")}/`;
    const session = await newSession();
    const lock = await session.mutex(`${prefix}job`).lock();
    const permits = session.semaphore(`${prefix}pool`, { permits: 2 });
    await permits.acquire();
    const read = await session.rwlock(`${prefix}table`).readLock();
    // Data that only looks like a contender's key (no lease) is no lock's.
    await etcd.put(`${prefix}data/1`, "x");

    const { code, out } = await cli(["locks", "ls", prefix, "--json"]);
    expect(code).toBe(0);
    expect(JSON.parse(out)).toEqual([
      { name: `${prefix}job`, kind: "mutex", holders: 1, waiters: 0, token: lock.revision },
      { name: `${prefix}pool`, kind: "semaphore", holders: 1, waiters: 0, token: expect.any(Number) },
      { name: `${prefix}table`, kind: "rwlock", holders: 1, waiters: 0, token: read.revision },
    ]);
    const text = await cli(["locks", "ls", prefix]);
    expect(text.out.split("\n")[0]).toMatch(/^NAME +KIND +HOLDERS +WAITERS +TOKEN$/);
    expect(text.out).toContain(`${prefix}job`);
  });

  it("revoke and request-release: the holder is told the reason; exit 1 when nothing is held", async () => {
    const name = uniqueName("cli");
    const session = await newSession();
    const lock = await session.mutex(name).lock();
    await sleep(1_300);

    const asked = await cli(["locks", "request-release", name, "--reason", "deploy at ten", "--json"]);
    expect(asked.code).toBe(0);
    expect(JSON.parse(asked.out)).toMatchObject({ name, key: lock.key, token: lock.revision, reason: "deploy at ten" });
    await until("the holder is asked", 2_000, () => lock.releaseRequested.aborted);
    expect(lock.held).toBe(true);

    const revoked = await cli(["locks", "revoke", name, "--reason", "stuck since Friday"]);
    expect(revoked.code).toBe(0);
    expect(revoked.out).toContain(`revoked ${lock.key} (token ${lock.revision}, lease ${leaseHex(session.leaseId)})`);
    await until("the holder learns it", 2_000, () => !lock.held);
    expect((lock.signal.reason as Error).message).toContain("stuck since Friday");

    const none = await cli(["locks", "revoke", name]);
    expect(none.code).toBe(1);
    expect(none.out).toBe(`${name}: nothing held, nothing revoked`);
  });

  it("watch: the line now, then after each change, in JSON lines, until --count changes", async () => {
    const name = uniqueName("cli");
    const session = await newSession();
    const watching = cli(["locks", "watch", name, "--json", "--count", "2"]);
    await sleep(500);
    const lock = await session.mutex(name).lock();
    await sleep(200);
    await lock.unlock();
    const { code, out } = await watching;
    expect(code).toBe(0);
    const lines = out.split("\n").map((line) => JSON.parse(line));
    expect(lines.map((l) => l.changes)).toEqual([0, 1, 2]);
    expect(lines[0]).toMatchObject({ name, free: true });
    expect(lines[1]).toMatchObject({ holders: [{ key: lock.key, token: lock.revision }] });
    expect(lines[2]).toMatchObject({ free: true });
  });

  it("watch ends with exit 0 when interrupted", async () => {
    const interrupt = new AbortController();
    const watching = cli(["locks", "watch", uniqueName("cli")], {}, interrupt.signal);
    await sleep(300);
    interrupt.abort();
    expect((await watching).code).toBe(0);
  });

  it("bad usage exits 2 with what to type; an unreachable etcd exits 3 naming the code", async () => {
    const usage = await cli(["locks", "inspect"]);
    expect(usage.code).toBe(2);
    expect(usage.err).toContain('"locks inspect" needs a lock name');
    expect(usage.err).toContain("Usage: etcd-edge locks");
    expect((await cli(["locks", "revoke", "x", "--reason", ""])).code).toBe(2);
    expect((await cli(["nope"])).code).toBe(2);
    expect((await cli(["locks", "ls", "--bogus"])).code).toBe(2);
    expect((await cli(["--help"])).code).toBe(0);
    const down = await cli(["locks", "ls", "--endpoints", "http://127.0.0.1:9", "--timeout", "500"]);
    expect(down.code).toBe(3);
    expect(down.err).toMatch(/^etcd-edge: (UNAVAILABLE|TIMEOUT): /);
  });
});

describe("with auth", () => {
  let member: Awaited<ReturnType<typeof startEtcd>>;
  afterAll(() => member?.stop());

  it("takes the user from --user or $ETCDCTL_USER and $ETCDCTL_PASSWORD, and never prints the password", async () => {
    member = await startEtcd();
    await enableAuth(member, { rootPassword: "root-pw" });
    await addUser(member, { rootPassword: "root-pw", user: "ops", password: "s3cret-pw" });
    const name = uniqueName("cli-auth");
    const endpoint = member.clientUrl;
    const asOps = client({ endpoints: endpoint, auth: { username: "ops", password: "s3cret-pw" } });
    const lock = await (await newSession(asOps)).mutex(name).lock();

    const flags = await cli(["locks", "inspect", name, "--json", "--endpoints", endpoint, "--user", "ops:s3cret-pw"]);
    expect(JSON.parse(flags.out).holders[0].key).toBe(lock.key);
    const env = await cli(["locks", "inspect", name, "--json"], {
      ETCDCTL_ENDPOINTS: endpoint,
      ETCDCTL_USER: "ops",
      ETCDCTL_PASSWORD: "s3cret-pw",
    });
    expect(JSON.parse(env.out).holders[0].key).toBe(lock.key);

    const wrong = await cli(["locks", "inspect", name, "--endpoints", endpoint, "--user", "ops:wrong-pw"]);
    expect(wrong.code).toBe(3);
    expect(wrong.err).toMatch(/UNAUTHENTICATED/);
    expect(wrong.err).not.toContain("wrong-pw");
    await lock.unlock();
  });
});
