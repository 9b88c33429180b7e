// A thawed sandbox: a Lambda process with a module-scope client, frozen (SIGSTOP) longer than its lease while a
// relay between it and etcd silently drops its connections (a NAT or load balancer forgets idle flows; the
// client's sockets stay open and never hear back), then thawed. Its stale holding reports the lock lost, and
// its first withLock completes within one attempt's deadline plus a round trip: a grant that goes out over a
// dead pooled connection moves on after one attempt (the session draws the lease ID, so it is safe to resend).
// With the global fetch and with etcd-edge/node. Needs the build (`npm run build`).
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { sleep } from "../../support/async.js";
import { sharedEndpoint } from "../../support/etcd.js";
import { type FaultProxy, startFaultProxy } from "../../support/fault-proxy.js";
import { startSandbox, type Sandbox } from "./sandbox.js";

const HANDLER = fileURLToPath(new URL("./thaw-handler.mjs", import.meta.url));
/** The handler's attempt timeout: what one dead pooled connection may cost. */
const ATTEMPT_MS = 1_000;
/** Longer than the handler's 2 s lease and its grace on the server. */
const FREEZE_MS = 4_500;

interface After {
  held: boolean;
  reason?: string;
  result: string;
  ms: number;
}

const opened: Array<{ sandbox: Sandbox; proxy: FaultProxy }> = [];
afterAll(async () => {
  for (const { sandbox, proxy } of opened) {
    await sandbox.kill();
    await proxy.close();
  }
});

describe.each(["global", "node"])("a sandbox thawed after its connections were dropped (%s fetch)", (kind) => {
  it("reports its stale lock lost, and its first withLock takes one attempt's deadline plus a round trip", async () => {
    const proxy = await startFaultProxy(sharedEndpoint());
    const sandbox = await startSandbox({ ETCD_ENDPOINTS: proxy.url, THAW_FETCH: kind }, { handler: HANDLER });
    opened.push({ sandbox, proxy });
    const name = `thawed/${randomUUID()}`;
    const hold = await sandbox.invoke<{ held: boolean }>({ step: "hold", name }).done;
    expect(hold.result?.held, JSON.stringify(hold.error)).toBe(true);

    // The flows are forgotten while the sandbox is frozen: its sockets stay open and never hear back.
    proxy.silence({ drop: true });
    sandbox.freeze();
    await sleep(FREEZE_MS);
    proxy.resume();
    sandbox.thaw();

    const after = await sandbox.invoke<After>({ step: "after", name }, { timeoutMs: 15_000 }).done;
    expect(after.error, sandbox.stderr()).toBeUndefined();
    const { held, reason, result, ms } = after.result!;
    expect(held).toBe(false);
    expect(reason).toBe("LOCK_LOST");
    expect(result).toBe("done");
    // One attempt's deadline plus a round trip, with room for a loaded machine's scheduling.
    expect(ms, `the first withLock after the thaw took ${Math.round(ms)} ms`).toBeLessThan(ATTEMPT_MS + 1_000);
  });
});
