// The operator's command as a user runs it: `npx etcd-edge` from the packed package installed in a project
// (its `bin`), against real etcd. test/etcd/operator-cli.test.ts covers every command in-process; this shows the
// installed bin runs, reads etcdctl's environment, prints JSON and exits with the documented codes.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Etcd } from "../../src/index.js";
import { runProcess } from "../support/processes.js";
import { etcdEndpoint, project } from "../support/runtimes.js";

const bin = () => join(project(), "node_modules", ".bin", "etcd-edge");

describe("npx etcd-edge, installed from the packed package", () => {
  it("inspects a held lock as JSON, and exits 1 revoking a free one", async () => {
    const endpoint = etcdEndpoint("3.4");
    const etcd = new Etcd({ endpoints: endpoint });
    const name = `operator-cli-${Date.now()}`;
    const session = await etcd.session({ ttl: 30 });
    const lock = await session.mutex(name).lock();
    try {
      const env = { ...process.env, ETCDCTL_ENDPOINTS: endpoint };
      const inspect = await runProcess(bin(), ["locks", "inspect", name, "--json"], { env, timeoutMs: 30_000 });
      expect(inspect.code, inspect.stderr).toBe(0);
      expect(JSON.parse(inspect.stdout)).toMatchObject({ name, kind: "mutex", holders: [{ key: lock.key }] });
      await lock.unlock();
      const revoke = await runProcess(bin(), ["locks", "revoke", name], { env, timeoutMs: 30_000 });
      expect(revoke.code).toBe(1);
      expect(revoke.stdout.trim()).toBe(`${name}: nothing held, nothing revoked`);
    } finally {
      await session.close();
    }
  });
});
