// Interoperability with Go's own client/v3/concurrency, built from etcd's Go module at the member's version
// (the Go peer, test/support/go-peer.ts): Go's Mutex and Election and the SDK's contend for one name, each way
// round. Revision order decides, the create revision fences, and one holder at a time shows in a counter that
// both sides raise under the lock with fenced writes. Only the versions built from Go have a peer: vitest.config.ts
// runs this file in the etcd-3.6 and etcd-3.7 projects.
import { afterEach, describe, expect, it } from "vitest";
import { cmp, op, type Session } from "../../src/index.js";
import { sleep, stillPending, until, within } from "../support/async.js";
import { client, fencedPut, keysUnder, leaseHex, sharedEndpoint, uniqueName } from "../support/etcd.js";
import { type GoPeer, startGoPeer } from "../support/go-peer.js";
import { etcdBinDir } from "./harness.js";

const etcd = client();
const peers = new Set<GoPeer>();
const sessions: Session[] = [];

afterEach(async () => {
  for (const peer of peers) peer.kill();
  peers.clear();
  await Promise.all(sessions.map((s) => s.close().catch(() => {})));
  sessions.length = 0;
});

function peer(command: string, ...args: string[]): GoPeer {
  const started = startGoPeer(etcdBinDir(), command, sharedEndpoint(), ...args);
  peers.add(started);
  return started;
}

async function newSession(): Promise<Session> {
  const session = await etcd.session({ ttl: 15 });
  sessions.push(session);
  return session;
}

const is = (event: string) => (line: { event?: string }) => line.event === event;

describe("Go's Mutex and the SDK's on one name", () => {
  it("Go holds first: the SDK waits; once Go unlocks the SDK holds with a later revision", async () => {
    const name = uniqueName("go");
    const go = peer("lock", name, "10");
    const locked = await go.next(is("locked"), 10_000);
    expect(locked.key).toBe(`${name}/${leaseHex(String(locked.lease))}`);

    const session = await newSession();
    const waiting = session.mutex(name).lock({ timeout: 20_000 });
    expect(await stillPending(waiting, 500)).toBe(true);
    // Go's fenced write lands while it holds.
    go.send(`write ${name}-data go`);
    expect((await go.next(is("written"), 10_000)).ok).toBe(true);

    go.send("unlock");
    await go.next(is("unlocked"), 10_000);
    const lock = await within(10_000, "the SDK's lock after Go's unlock", waiting);
    expect(lock.revision).toBeGreaterThan(Number(locked.revision));
    expect(await keysUnder(etcd, name)).toEqual([lock.key]);
    expect(await fencedPut(etcd, lock, `${name}-data`, "sdk")).toBe(true);
    await lock.unlock();
    expect(await within(10_000, "the peer's exit", go.exited)).toBe(0);
  });

  it("the SDK holds first: Go waits; once the SDK unlocks Go holds, the SDK's fenced write refused", async () => {
    const name = uniqueName("go");
    const session = await newSession();
    const lock = await session.mutex(name).lock();
    const go = peer("lock", name, "10");
    await until("Go joined the line", 10_000, async () => (await keysUnder(etcd, name)).length === 2);
    await sleep(500);
    expect(go.lines).toEqual([]);
    expect((await etcd.inspectLock(name)).holder?.key).toBe(lock.key);

    await lock.unlock();
    const locked = await go.next(is("locked"), 10_000);
    expect(Number(locked.revision)).toBeGreaterThan(lock.revision);
    // The SDK's fencing token (its key at its create revision) is stale now: refused; Go's fenced write lands.
    const stale = await etcd
      .txn()
      .if(cmp.createRevision(lock.key, "==", lock.revision))
      .then(op.put(`${name}-data`, "stale"))
      .commit();
    expect(stale.succeeded).toBe(false);
    go.send(`write ${name}-data go`);
    expect((await go.next(is("written"), 10_000)).ok).toBe(true);
    expect((await etcd.get(`${name}-data`))?.value).toBe("go");
    go.send("unlock");
    await go.next(is("unlocked"), 10_000);
  });

  it("Go's and the SDK's holders raise one counter under the lock: nothing is lost, both sides get turns", async () => {
    const name = uniqueName("go-count");
    const counter = `${name}-counter`;
    const SECONDS = 4;
    const go = peer("count", name, counter, "3", String(SECONDS));
    const end = performance.now() + SECONDS * 1_000;
    let added = 0;
    const sdkWorker = async () => {
      const session = await newSession();
      const mutex = session.mutex(name);
      while (performance.now() < end) {
        const lock = await mutex.lock({ timeout: 20_000 });
        const n = Number((await etcd.get(counter))?.value ?? "0");
        if (await fencedPut(etcd, lock, counter, String(n + 1))) added++;
        await lock.unlock();
      }
    };
    await Promise.all([sdkWorker(), sdkWorker(), sdkWorker()]);
    const done = await go.next((line) => "added" in line, 30_000);
    const goAdded = Number(done.added);
    expect(goAdded).toBeGreaterThan(0);
    expect(added).toBeGreaterThan(0);
    // A holder's fenced write is refused only if it was not the holder: neither side's ever is.
    expect(done.refused).toBe(0);
    expect(Number((await etcd.get(counter))?.value)).toBe(goAdded + added);
    expect(await keysUnder(etcd, name)).toEqual([]);
  });
});

describe("Go's Election and the SDK's on one name", () => {
  it("Go leads first: the SDK's campaign waits and sees Go's value; once Go resigns the SDK leads", async () => {
    const name = uniqueName("go-elect");
    const go = peer("elect", name, "go-value", "10");
    const leader = await go.next(is("leader"), 10_000);
    const session = await newSession();
    const election = session.election(name);
    expect(await election.leader()).toMatchObject({ value: "go-value", revision: Number(leader.revision) });
    const campaign = election.campaign("sdk-value", { timeout: 20_000 });
    expect(await stillPending(campaign, 500)).toBe(true);
    go.send("resign");
    await go.next(is("resigned"), 10_000);
    await within(10_000, "the SDK's campaign", campaign);
    expect(election.isLeader).toBe(true);
    expect(election.revision).toBeGreaterThan(Number(leader.revision));
    expect(await election.leader()).toMatchObject({ value: "sdk-value", leaseId: session.leaseId });
    await election.resign();
  });

  it("the SDK leads first: Go's campaign waits; once the SDK resigns Go leads with a later revision", async () => {
    const name = uniqueName("go-elect");
    const session = await newSession();
    const election = session.election(name);
    await election.campaign("sdk-value");
    const go = peer("elect", name, "go-value", "10");
    await until("Go joined the line", 10_000, async () => (await keysUnder(etcd, name)).length === 2);
    await sleep(500);
    expect(go.lines).toEqual([]);
    const revision = election.revision!;
    await election.resign();
    const leader = await go.next(is("leader"), 10_000);
    expect(Number(leader.revision)).toBeGreaterThan(revision);
    expect(await election.leader()).toMatchObject({ value: "go-value", revision: Number(leader.revision) });
    go.send("resign");
    await go.next(is("resigned"), 10_000);
  });
});

describe("an operator's request and revocation beside Go's Mutex", () => {
  it("a request to either holder misleads neither side; a revocation hands Go's lock over", async () => {
    const name = uniqueName("go-ask");
    const go = peer("lock", name, "10");
    const locked = await go.next(is("locked"), 10_000);
    const session = await newSession();
    const waiting = session.mutex(name).lock({ timeout: 20_000 });
    await until("the SDK joined", 10_000, async () => (await keysUnder(etcd, name)).length === 2);
    expect((await etcd.requestRelease(name, { reason: "asked" }))?.key).toBe(locked.key);
    expect(await stillPending(waiting, 500)).toBe(true);
    const revoked = await etcd.revokeLock(name, { reason: "taken" });
    expect(revoked?.token).toBe(Number(locked.revision));
    const lock = await within(5_000, "the SDK's lock", waiting);
    // Go's fenced write is refused from the revocation on.
    go.send(`write ${name}-data go`);
    expect((await go.next(is("written"), 10_000)).ok).toBe(false);

    // Go waits behind the SDK's holder, asked to release: the record is no contender to Go.
    const go2 = peer("lock", name, "10");
    await until("Go joined the line", 10_000, async () => (await keysUnder(etcd, name)).length === 2);
    await sleep(1_200);
    await etcd.requestRelease(name, { reason: "deploy" });
    await until("the SDK's holder is asked", 2_000, () => lock.releaseRequested.aborted);
    await sleep(300);
    expect(go2.lines).toEqual([]);
    await lock.unlock();
    const goLocked = await go2.next(is("locked"), 10_000);
    expect(Number(goLocked.revision)).toBeGreaterThan(lock.revision);
    go2.send("unlock");
    await go2.next(is("unlocked"), 10_000);
  });
});
