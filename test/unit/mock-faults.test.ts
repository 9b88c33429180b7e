// The mock's faults as docs/testing.md's table states them: which calls survive a member that answers "no
// leader" and an answer lost after the request was applied, and what the others report.
import { describe, expect, it } from "vitest";
import { op } from "../../src/index.js";
import { rejection, until } from "../support/async.js";
import { mockClient } from "../support/mock.js";

describe("faults.unavailable(n)", () => {
  it("reads, a lock's join and release, and a session's grant are retried; a plain write fails at once", async () => {
    const { etcd, mock } = mockClient();
    await etcd.put("k", "v");
    mock.faults.unavailable(1);
    expect((await etcd.get("k"))?.value).toBe("v");
    mock.faults.unavailable(1);
    const session = await etcd.session({ ttl: 10, keepAlive: "manual" });
    mock.faults.unavailable(1);
    const lock = await session.mutex("job").lock();
    mock.faults.unavailable(1);
    await lock.unlock();
    mock.faults.unavailable(1);
    const put = await rejection(etcd.put("k", "w"));
    expect(put.code).toBe("UNAVAILABLE");
    expect(put.indeterminate).toBe(false);
    expect(mock.get("k")?.value).toBe("v");
  });
});

describe("faults.loseAnswers(n, path)", () => {
  it("a lock's join is resent and finds its key: one holder, one key", async () => {
    const { etcd, mock } = mockClient();
    const session = await etcd.session({ ttl: 10, keepAlive: "manual" });
    mock.faults.loseAnswers(1, "/v3/kv/txn");
    const lock = await session.mutex("job").lock();
    expect(lock.held).toBe(true);
    expect(mock.keys("job/")).toEqual([lock.key]);
    await lock.unlock();
  });

  it("a put is not resent: indeterminate, and applied", async () => {
    const { etcd, mock } = mockClient();
    mock.faults.loseAnswers(1, "/v3/kv/put");
    const error = await rejection(etcd.put("k", "v"));
    expect(error.code).toBe("UNAVAILABLE");
    expect(error.indeterminate).toBe(true);
    expect(mock.get("k")?.value).toBe("v");
  });

  it("a releasing write: indeterminate, applied, and the lock ends released in the background", async () => {
    const { etcd, mock } = mockClient();
    const session = await etcd.session({ ttl: 10, keepAlive: "manual" });
    const lock = await session.mutex("job").lock();
    mock.faults.loseAnswers(1, "/v3/kv/txn");
    const error = await rejection(lock.unlockWith([op.put("result", "x")]));
    expect(error.indeterminate).toBe(true);
    expect(mock.get("result")?.value).toBe("x");
    await until("the background release settles", 5_000, () => !lock.held);
    expect(mock.keys("job/")).toEqual([]);
  });
});
