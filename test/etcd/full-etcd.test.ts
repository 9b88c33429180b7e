// A full etcd: a member whose backend reaches its --quota-backend-bytes raises its NOSPACE alarm and refuses
// every write. What the SDK's users see then, and that it recovers once an operator frees space: new writes and
// acquisitions fail at once with a typed error that names the alarm and the way out; a lock held before stays
// held, renews and releases, and its waiter takes it over; after compaction, defragmentation and disarming,
// locks work again, with no update lost and no key left behind.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Etcd, op } from "../../src/index.js";
import { rejection } from "../support/async.js";
import { client, keysUnder, untilLineLength } from "../support/etcd.js";
import { type EtcdMember, startEtcd } from "./harness.js";

let member: EtcdMember;
let etcd: Etcd;

beforeAll(async () => {
  member = await startEtcd({ extraArgs: ["--quota-backend-bytes=1048576"] });
  etcd = client({ endpoints: [member.clientUrl] });
}, 60_000);

afterAll(async () => {
  await member?.stop();
});

describe("a full etcd (its NOSPACE alarm)", () => {
  it("refuses writes and acquisitions at once, typed; keeps what is held; recovers once space is freed", async () => {
    const manual = { ttl: 10, keepAlive: "manual" } as const;
    const holderSession = await etcd.session(manual);
    const holder = await holderSession.mutex("full/job").lock();
    const waiterSession = await etcd.session(manual);
    const waiting = waiterSession.mutex("full/job").lock({ timeout: 60_000 });
    await untilLineLength(etcd, "full/job", 2);
    // Granted before the alarm: a new lease is a write, refused once it is raised.
    const otherSession = await etcd.session(manual);
    expect((await etcd.txn().if(holder.ifHeld()).then(op.put("full/counter", "1")).commit()).succeeded).toBe(true);

    const big = "x".repeat(60_000);
    let refusal: unknown;
    for (let i = 0; i < 64 && refusal === undefined; i++) {
      await etcd.put(`fill/${i}`, big).catch((error: unknown) => {
        refusal = error;
      });
    }
    const full = refusal as { code?: string; message?: string };
    expect(full.code).toBe("RESOURCE_EXHAUSTED");
    expect(full.message).toMatch(/database space exceeded: the cluster raised its NOSPACE alarm/);
    expect(full.message).toMatch(/etcdctl compact.*etcdctl defrag.*etcdctl alarm disarm/);
    expect(await member.etcdctl("alarm", "list")).toMatch(/NOSPACE/);

    // New acquisitions fail at once (their join is a put), typed, and leave nothing in the line.
    const acquired = await rejection(otherSession.mutex("full/other").lock({ timeout: 30_000 }));
    expect(acquired.code).toBe("RESOURCE_EXHAUSTED");
    expect(await keysUnder(etcd, "full/other")).toEqual([]);
    expect((await rejection(etcd.withLock("full/with", () => 1, { timeout: 30_000 }))).code).toBe("RESOURCE_EXHAUSTED");

    // What is held stays held: renewals and releases are not writes to the backend's quota.
    expect(await holder.renew()).toBeGreaterThan(0);
    expect(holder.held).toBe(true);
    await holder.unlock();
    const next = await waiting;
    expect(next.held).toBe(true);
    expect(await next.renew()).toBeGreaterThan(0);

    // The operator frees space: the filler goes, history is compacted, every member defragmented, alarm off.
    await etcd.delete({ prefix: "fill/" });
    const { header } = await etcd.range({ key: "full/counter" });
    await member.etcdctl("compact", String(header.revision));
    await member.etcdctl("defrag");
    await member.etcdctl("alarm", "disarm");
    expect(await member.etcdctl("alarm", "list")).not.toMatch(/NOSPACE/);

    const fenced = await etcd.txn().if(next.ifHeld()).then(op.put("full/counter", "2")).commit();
    expect(fenced.succeeded).toBe(true);
    await next.unlock();
    await (await otherSession.mutex("full/other").lock()).unlock();
    expect(await etcd.withLock("full/with", () => "ok")).toBe("ok");

    expect((await etcd.get("full/counter"))?.value).toBe("2");
    for (const name of ["full/job", "full/other", "full/with"]) expect(await keysUnder(etcd, name)).toEqual([]);
    await Promise.all([holderSession.close(), waiterSession.close(), otherSession.close(), etcd.close()]);
  });
});
