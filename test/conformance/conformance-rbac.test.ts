// What a lock user needs from etcd's RBAC, checked with a user whose role grants readwrite on one prefix and
// nothing else (the README's table): every recipe, withLock, inspect and a ticket's takeover work on names
// under that prefix. And a renewal etcd refuses for want of permission (etcd 3.5.28+/3.6.9+, CVE-2026-33413:
// renewing needs put on every key attached to the lease) ends the session and its locks as lost at once, with
// a typed error that names the missing permission, instead of being retried until the deadline. Our real
// members (3.4.23, 3.5.16) predate that check; the mock's 3.6 and 3.7 dialects enforce it.
import { describe, expect, it } from "vitest";
import { op } from "../../src/index.js";
import { rejection, sleep, until } from "../support/async.js";
import { freshNames, recordingFetch } from "../support/etcd.js";
import { useBackend } from "./backend.js";

const auth = { rootPassword: "root-pw", users: { locker: { password: "locker-pw", prefix: "app/locks/" } } };
const { backend } = useBackend({ auth });
const fresh = freshNames("app/locks/n");

const locker = () => backend.client({ auth: { username: "locker", password: "locker-pw" } });
const root = () => backend.client({ auth: { username: "root", password: "root-pw" } });
/** Whether this backend checks a renewal's keys (etcd 3.6 and later, and 3.5.28 and later). */
const checksRenewals = () => backend.wire === "3.6" || backend.wire === "3.7";

describe("readwrite on the names' prefix is all a lock user needs", () => {
  it("mutex, withLock, ticket, inspect", async () => {
    const etcd = locker();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const name = fresh();
    const lock = await session.mutex(name).lock();
    expect((await etcd.inspectLock(name)).holder?.key).toBe(lock.key);
    await session.renew();
    const resumed = await etcd.resumeLock(lock.ticket());
    await resumed.unlockWith([op.put(`${name}-data`, "x")]);
    expect(await etcd.withLock(name, () => "done")).toBe("done");
    await etcd.close();
    await resumed.session.close();
    await session.close();
  });

  it("a name outside the grant: PERMISSION_DENIED naming the lock and the grant it needs", async () => {
    const etcd = locker();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const error = await rejection(session.mutex("elsewhere/n").lock());
    expect(error.code).toBe("PERMISSION_DENIED");
    expect(error.message).toContain("lock elsewhere/n");
    expect(error.message).toMatch(/readwrite on prefix ".*elsewhere\/n\/"/);
    await session.close();
  });

  it("election, semaphore, read-write lock, lockAll", async () => {
    const etcd = locker();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const election = session.election(fresh());
    await election.campaign("me");
    expect((await election.leader())?.value).toBe("me");
    await election.proclaim("still me");
    await election.resign();
    await (await session.semaphore(fresh(), { permits: 2 }).acquire()).release();
    const rw = session.rwlock(fresh());
    await (await rw.readLock()).unlock();
    await (await rw.writeLock()).unlock();
    await (await session.lockAll([fresh(), fresh()])).unlock();
    expect(await etcd.withSemaphore(fresh(), 1, () => 1)).toBe(1);
    await session.close();
    await etcd.close();
  });

  it("outside the prefix a lock is PERMISSION_DENIED, typed, and leaves nothing behind", async () => {
    const etcd = locker();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const error = await rejection(session.mutex("elsewhere/job").lock());
    expect(error.code).toBe("PERMISSION_DENIED");
    expect((await root().range({ prefix: "elsewhere/" })).count).toBe(0);
    await session.close();
  });
});

describe("a holding that lasts, for a user who may not read the operators' records", () => {
  it("asks for their stream once and, refused, never again; its own line's stream still serves it", async () => {
    const fetch = recordingFetch(backend.fetch);
    const etcd = backend.client({ fetch, auth: { username: "locker", password: "locker-pw" } });
    const session = await etcd.session({ ttl: 30, keepAlive: "auto" });
    const name = fresh();
    const lock = await session.mutex(name).lock();
    // A holding follows its key after a second; a refused stream reopened would come back within 2 s many times.
    await sleep(3_000);
    const watched = fetch.calls
      .filter((c) => c.path === "/v3/watch")
      .map((c) => atob((JSON.parse(c.body) as { create_request: { key: string } }).create_request.key));
    expect(watched.filter((key) => key === "__etcd-edge/requests/")).toHaveLength(1);
    expect(watched).toContain(`${name}/`);
    expect(lock.held).toBe(true);
    await root().delete(lock.key);
    await until("the holding learns its key was deleted", 2_000, () => !lock.held);
    await session.close();
    await etcd.close();
  });
});

describe("a renewal refused for want of permission", () => {
  it("ends the session and its lock as lost at once, saying which permission is missing", async () => {
    const etcd = locker();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex(fresh()).lock();
    // Another key on the same lease, outside what this user may write: its renewal now needs a put it lacks.
    await root().put("elsewhere/attached", "x", { lease: session.leaseId });
    if (!checksRenewals()) {
      // etcd 3.4.23 and 3.5.16 renew it regardless.
      expect(await session.renew()).toBeGreaterThan(0);
      expect(lock.held).toBe(true);
      await lock.unlock();
      // Revoking checks the attached keys on every version: the key goes first.
      await root().delete("elsewhere/attached");
      await session.close();
      return;
    }
    const error = await rejection(session.renew());
    expect(error.code).toBe("PERMISSION_DENIED");
    expect(error.message).toMatch(/needs put permission on every key attached to a lease/);
    expect(session.alive).toBe(false);
    expect(lock.held).toBe(false);
    const lost = lock.signal.reason as { code?: string; message?: string; cause?: unknown };
    expect(lost.code).toBe("LOCK_LOST");
    expect(lost.message).toMatch(/could not be renewed/);
    expect(lost.cause).toBe(error);
    expect((await rejection(lock.unlock())).code).toBe("LOCK_LOST");
    // Not retried: the session is lost, so renew() refuses at once, sending nothing.
    expect((await rejection(session.renew())).code).toBe("PERMISSION_DENIED");
    await root().lease.revoke(session.leaseId);
  });
});
