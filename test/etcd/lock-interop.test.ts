// Interoperability with `etcdctl lock` (Go's concurrency.Mutex): same key layout, same line, so the SDK
// and etcdctl never hold the same lock at once, whichever takes it first.
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { op, type Session } from "../../src/index.js";
import { etcdBinDir } from "./harness.js";
import { onLines } from "../support/processes.js";
import { sleep, stillPending, until, within } from "../support/async.js";
import { acquisitionKey, client, keysUnder, leaseHex, sharedEndpoint, uniqueName } from "../support/etcd.js";

const etcd = client();
const children = new Set<ChildProcess>();
const sessions: Session[] = [];

afterEach(async () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
  children.clear();
  await Promise.all(sessions.map((s) => s.close().catch(() => {})));
  sessions.length = 0;
});

interface Etcdctl {
  child: ChildProcess;
  /** stdout lines so far, each with the time it was seen. */
  lines: Array<{ text: string; at: number }>;
  exited: Promise<{ code: number | null; at: number }>;
  stderr(): string;
}

function etcdctlLock(name: string, ...command: string[]): Etcdctl {
  const args = [
    `--endpoints=${sharedEndpoint()}`,
    "lock",
    name,
    "--ttl=10",
    ...(command.length > 0 ? ["--", ...command] : []),
  ];
  const child = spawn(join(etcdBinDir(), "etcdctl"), args, {
    env: { ...process.env, ETCDCTL_API: "3" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  const lines: Etcdctl["lines"] = [];
  let errText = "";
  onLines(child.stdout!, (text) => lines.push({ text, at: performance.now() }));
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (errText += chunk));
  const exited = new Promise<{ code: number | null; at: number }>((resolve) =>
    child.once("exit", (code) => resolve({ code, at: performance.now() })),
  );
  return { child, lines, exited, stderr: () => errText };
}

async function newSession(): Promise<Session> {
  const session = await etcd.session({ ttl: 15 });
  sessions.push(session);
  return session;
}

describe("etcdctl lock and the SDK on one name", () => {
  it("SDK holds first: etcdctl waits (prints nothing) until the SDK unlocks, then holds its own key", async () => {
    const name = uniqueName();
    const session = await newSession();
    const lock = await session.mutex(name).lock();
    // The SDK's key is the acquisition's own: etcdctl orders it by create revision under the prefix all the same.
    expect(lock.key).toMatch(acquisitionKey(name, session.leaseId));

    const ctl = etcdctlLock(name);
    // etcdctl has joined the line (its key exists) but must not have acquired.
    await until("etcdctl joined the line", 10_000, async () => (await keysUnder(etcd, name)).length === 2);
    await sleep(1_000);
    expect(ctl.lines).toEqual([]);
    expect(ctl.child.exitCode).toBeNull();
    const info = await etcd.inspectLock(name);
    expect(info.holder?.key).toBe(lock.key);
    expect(info.waiters).toHaveLength(1);

    const unlockedAt = performance.now();
    await lock.unlock();
    await until("etcdctl printed its key", 10_000, () => ctl.lines.length > 0);
    const printed = ctl.lines[0]!;
    expect(printed.at).toBeGreaterThan(unlockedAt);

    // etcdctl's key: `<name>/<its lease in lowercase hex>`, Go's layout, which the SDK's line accepts.
    const { kvs } = await etcd.range({ prefix: `${name}/` });
    expect(kvs).toHaveLength(1);
    const ctlKey = kvs[0]!;
    expect(printed.text).toBe(ctlKey.key);
    expect(ctlKey.key).toBe(`${name}/${leaseHex(ctlKey.lease)}`);
    expect(ctlKey.key).toMatch(new RegExp(`^${name}/[0-9a-f]+$`));
    expect(ctlKey.createRevision).toBeGreaterThan(lock.revision);
    expect((await etcd.inspectLock(name)).holder?.key).toBe(ctlKey.key);

    // While etcdctl holds, the SDK cannot.
    const other = await newSession();
    expect(await other.mutex(name).tryLock()).toBeUndefined();

    // SIGINT: etcdctl unlocks and closes its session, and the SDK gets the lock again.
    const waiting = other.mutex(name).lock({ timeout: 20_000 });
    expect(await stillPending(waiting, 300)).toBe(true);
    ctl.child.kill("SIGINT");
    const again = await within(10_000, "SDK acquisition after etcdctl exits", waiting);
    expect(again.revision).toBeGreaterThan(ctlKey.createRevision);
    expect(await keysUnder(etcd, name)).toEqual([again.key]);
    await again.unlock();
    await within(10_000, "etcdctl exit", ctl.exited);
  });

  it("etcdctl holds first (running a command): the SDK waits until the command is done", async () => {
    const name = uniqueName();
    const ctl = etcdctlLock(name, "sh", "-c", 'echo "held $ETCD_LOCK_KEY"; sleep 2; echo done');
    await until("etcdctl holds", 10_000, () => ctl.lines.length > 0);
    const held = ctl.lines[0]!;
    expect(held.text).toMatch(new RegExp(`^held ${name}/[0-9a-f]+$`));
    const ctlKeyName = held.text.slice("held ".length);
    const ctlKey = (await etcd.range({ key: ctlKeyName })).kvs[0]!;
    expect(ctlKey.key).toBe(`${name}/${leaseHex(ctlKey.lease)}`);

    const session = await newSession();
    const fenced = `${name}-data`;
    const pending = session.mutex(name).lock({ timeout: 20_000 });
    const lock = await within(15_000, "SDK acquisition", pending);
    const acquiredAt = performance.now();

    // Acquired only after the command finished: its key is gone and its last line was printed (the pipe
    // may be read a moment after the SDK's watch event, hence the short wait).
    await until("etcdctl's command printed done", 1_000, () => ctl.lines.length === 2);
    expect(ctl.lines.map((l) => l.text)).toEqual([held.text, "done"]);
    expect(acquiredAt - held.at).toBeGreaterThan(1_500);
    expect(await keysUnder(etcd, name)).toEqual([lock.key]);
    expect(lock.revision).toBeGreaterThan(ctlKey.createRevision);
    expect((await etcd.txn().if(lock.ifHeld()).then(op.put(fenced, "sdk")).commit()).succeeded).toBe(true);

    // etcdctl, started again while the SDK holds, waits for the SDK in turn.
    const ctl2 = etcdctlLock(name, "sh", "-c", 'echo "held $ETCD_LOCK_KEY"');
    await until("second etcdctl joined", 10_000, async () => (await keysUnder(etcd, name)).length === 2);
    await sleep(500);
    expect(ctl2.lines).toEqual([]);
    await lock.unlock();
    const exit = await within(10_000, "second etcdctl exit", ctl2.exited);
    expect(exit.code).toBe(0);
    expect(ctl2.lines.map((l) => l.text)).toEqual([expect.stringMatching(new RegExp(`^held ${name}/[0-9a-f]+$`))]);
    expect((await within(10_000, "first etcdctl exit", ctl.exited)).code).toBe(0);
    await until("line empty", 5_000, async () => (await keysUnder(etcd, name)).length === 0);
  });

  it("a request to release etcdctl's holder (requestRelease) misleads nobody; revokeLock hands over", async () => {
    const name = uniqueName();
    const ctl = etcdctlLock(name);
    await until("etcdctl holds", 10_000, () => ctl.lines.length > 0);
    const session = await newSession();
    const waiting = session.mutex(name).lock({ timeout: 20_000 });
    await until("the SDK joined", 10_000, async () => (await keysUnder(etcd, name)).length === 2);
    const line = await keysUnder(etcd, name);
    expect((await etcd.requestRelease(name, { reason: "asked" }))?.key).toBe(ctl.lines[0]!.text);
    expect(await keysUnder(etcd, name)).toEqual(line);
    expect(await stillPending(waiting, 500)).toBe(true);
    // Taken from etcdctl: the SDK's waiter holds, with a later token.
    const revoked = await etcd.revokeLock(name, { reason: "taken" });
    expect(revoked?.key).toBe(ctl.lines[0]!.text);
    const lock = await within(5_000, "the SDK's lock after the revocation", waiting);
    expect(lock.revision).toBeGreaterThan(revoked!.token);

    // etcdctl waits behind the SDK's holder, asked to release: it is not blocked by the request's record.
    const ctl2 = etcdctlLock(name);
    await until("etcdctl joined", 10_000, async () => (await keysUnder(etcd, name)).length === 2);
    await etcd.requestRelease(name);
    await sleep(500);
    expect(ctl2.lines).toEqual([]);
    await lock.unlock();
    await until("etcdctl holds after the SDK's unlock", 10_000, () => ctl2.lines.length > 0);
    ctl.child.kill("SIGINT");
    ctl2.child.kill("SIGINT");
    await within(10_000, "etcdctl exits", Promise.all([ctl.exited, ctl2.exited]));
  });
});
