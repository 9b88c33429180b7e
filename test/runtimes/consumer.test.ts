// What a user's project sees of the packed package, installed by name without its optional peers (no msw, no
// undici): its types compile in a strict project on target ES2022 with skipLibCheck off and no `lib` setting
// (the types pull in what `await using` needs themselves), and `etcd-edge/testing` loads and runs without msw.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { afterAll, describe, expect, inject, it } from "vitest";
import { runProcess } from "../support/processes.js";

const dir = inject("runtimesProject");
const work = mkdtempSync(join(dir, "consumer-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const CONSUMER =
  `import { Etcd, isEtcdError, op, type EtcdEvent, type Lock, type LockTicket, type Session } ` +
  `from "etcd-edge";
import { createMockEtcd } from "etcd-edge/testing";

export async function run(): Promise<number> {
  const mock = createMockEtcd();
  const events: EtcdEvent[] = [];
  const etcd = new Etcd({ endpoints: "http://etcd.test:2379", fetch: mock.fetch, ` +
  `onEvent: (event) => void events.push(event) });
  const session: Session = await etcd.session({ ttl: 10 });
  await using lock: Lock<Session> = await session.mutex("jobs").lock({ timeout: 1_000 });
  const ticket: LockTicket = lock.ticket();
  const write = await etcd.txn().if(lock.ifHeld()).then(op.put("state/jobs", ticket.name)).commit();
  const permit = await session.semaphore("slots", { permits: 2 }).acquire();
  await permit.release();
  try {
    await etcd.get("");
  } catch (error) {
    if (!isEtcdError(error, "INVALID_ARGUMENT")) throw error;
  }
  return write.succeeded ? events.length : -1;
}
`;

describe("the packed package in a user's project", () => {
  it("has no msw or undici installed (optional peers)", () => {
    expect(existsSync(join(dir, "node_modules", "etcd-edge"))).toBe(true);
    expect(existsSync(join(dir, "node_modules", "msw"))).toBe(false);
    expect(existsSync(join(dir, "node_modules", "undici"))).toBe(false);
  });

  it("its types compile: strict, target ES2022, skipLibCheck off, no lib setting", async () => {
    writeFileSync(join(work, "consumer.ts"), CONSUMER);
    writeFileSync(
      join(work, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          skipLibCheck: false,
          noEmit: true,
          types: [],
        },
        files: ["consumer.ts"],
      }),
    );
    // The repo's own TypeScript, run on the user's project.
    const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
    const result = await runProcess(process.execPath, [tsc, "-p", join(work, "tsconfig.json")], {
      cwd: work,
      timeoutMs: 120_000,
    });
    expect(result.stdout + result.stderr).toBe("");
    expect(result.code).toBe(0);
  }, 150_000);

  it("declares as values what it exports at run time; the type-only bases are types (issue 37, 7)", async () => {
    // 4e52409 declared Held, HeldKey and LeaseSession as classes in dist/index.d.ts, though the source exports them
    // as types: `x instanceof Held` compiled under --strict and failed at load.
    const entry = join(dir, "node_modules", "etcd-edge", "dist");
    const script = join(work, "exports.mjs");
    writeFileSync(script, `console.log(JSON.stringify(Object.keys(await import("etcd-edge")).sort()));`);
    const loaded = await runProcess(process.execPath, [script], { cwd: dir, timeoutMs: 60_000 });
    const runtime = JSON.parse(loaded.stdout) as string[];
    const { readFileSync } = await import("node:fs");
    for (const file of ["index"]) {
      const types = readFileSync(join(entry, `${file}.d.ts`), "utf8");
      const values = [...types.matchAll(/^export \{([^}]*)\};$/gm)].flatMap((m) =>
        m[1]!.split(",").map(
          (name) =>
            name
              .trim()
              .split(/\s+as\s+/)
              .pop()!,
        ),
      );
      expect(values.sort()).toEqual(runtime);
    }
    writeFileSync(
      join(work, "bases.ts"),
      `import { Held, HeldKey, LeaseSession, Lock } from "etcd-edge";
export const typed = (x: unknown, lock: Lock, base: Held, key: HeldKey, lease: LeaseSession) =>
  [lock.held, base.held, key.revision, lease.ttl, x instanceof Held, x instanceof LeaseSession];
`,
    );
    writeFileSync(
      join(work, "tsconfig.bases.json"),
      JSON.stringify({
        compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true },
        files: ["bases.ts"],
      }),
    );
    const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
    const result = await runProcess(process.execPath, [tsc, "--noEmit", "-p", join(work, "tsconfig.bases.json")], {
      cwd: work,
      timeoutMs: 120_000,
    });
    // Used as types they compile; as values they are refused where they are written, not at load.
    const errors = (result.stdout + result.stderr).trim().split("\n");
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(
      /bases\.ts\(3,\d+\): error TS(1361|2693): 'Held' (cannot be used as a value|only refers to a type)/,
    );
    expect(errors[1]).toMatch(
      /bases\.ts\(3,\d+\): error TS(1361|2693): 'LeaseSession' (cannot be used as a value|only refers to a type)/,
    );
  }, 150_000);

  it("etcd-edge/testing loads and runs without msw", async () => {
    const script = join(work, "no-msw.mjs");
    writeFileSync(
      script,
      `import { Etcd } from "etcd-edge";
import { createMockEtcd } from "etcd-edge/testing";
const mock = createMockEtcd();
const etcd = new Etcd({ endpoints: "http://etcd.test:2379", fetch: mock.fetch });
await etcd.put("k", "v");
console.log(JSON.stringify({ value: (await etcd.get("k"))?.value, locked: await etcd.withLock("jobs", () => "yes") }));
`,
    );
    const result = await runProcess(process.execPath, [script], { cwd: dir, timeoutMs: 60_000 });
    expect(result.stderr).toBe("");
    expect(JSON.parse(result.stdout)).toEqual({ value: "v", locked: "yes" });
  });
});
