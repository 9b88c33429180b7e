// The shape of src/: dependencies point one way (errors ← gateway ← api ← lock ← the front door), the
// Node-only and testing entries stand beside the layers, and no file imports in a circle. Read from the
// import statements themselves, so a new file cannot slip past.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "../../src");

/** Each room and the rooms it may import (besides itself). */
const ALLOWED: Record<string, readonly string[]> = {
  version: [],
  errors: [],
  events: ["errors"],
  gateway: ["errors", "events", "version"],
  api: ["errors", "events", "gateway", "version"],
  lock: ["errors", "events", "gateway", "api", "version"],
  // The front door: `Etcd` and the package's exports.
  front: ["errors", "events", "gateway", "api", "lock", "version"],
  // Node-only speedups: a fetch, nothing of the API or the locks.
  node: ["errors", "gateway", "version"],
  // etcd-edge/otel: subscribes to the channels the client publishes on; nothing of the client itself.
  otel: ["errors", "events", "version"],
  // The in-memory gateway is etcd's side of the wire: it shares nothing with the client.
  testing: [],
  // etcd-edge/fence: statements and conditions for the stores that check a fence; nothing of the client.
  fence: ["errors", "version"],
  // etcd-edge/operate: the front door with an operator's calls.
  operate: ["errors", "events", "gateway", "api", "lock", "front", "version"],
  // The operator's command (`npx etcd-edge`): a program on top of the front door, with Node's fetch for TLS.
  cli: ["errors", "events", "gateway", "api", "lock", "front", "operate", "node", "version"],
};

function roomOf(file: string): string {
  const path = relative(SRC, file);
  if (path === "etcd.ts" || path === "index.ts") return "front";
  if (path === "version.ts") return "version";
  return path.split("/")[0]!;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sourceFiles(join(dir, entry.name))
      : entry.name.endsWith(".ts")
        ? [join(dir, entry.name)]
        : [],
  );
}

/** The files `file` imports or re-exports from src/ (type-only imports included: they shape the layers too). */
function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const specifiers = [
    ...text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;]*?\bfrom\s+"(\.[^"]+)"|import\(\s*"(\.[^"]+)"\s*\)/g),
  ].map((m) => (m[1] ?? m[2])!);
  return specifiers.map((s) => resolve(dirname(file), s.replace(/\.js$/, ".ts")));
}

/** Imports that go up or sideways: from a room into one it may not import. */
function upwardImports(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const out: string[] = [];
  for (const [file, targets] of graph) {
    const from = roomOf(file);
    for (const target of targets) {
      const to = roomOf(target);
      if (to !== from && !(ALLOWED[from] ?? []).includes(to))
        out.push(`${relative(SRC, file)} (${from}) → ${relative(SRC, target)} (${to})`);
    }
  }
  return out;
}

/** Circles of imports, each as the path that closes it. */
function circles(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const out: string[] = [];
  const state = new Map<string, "open" | "done">();
  const visit = (file: string, path: string[]) => {
    if (state.get(file) === "done") return;
    if (state.get(file) === "open") {
      out.push([...path.slice(path.indexOf(file)), file].map((f) => relative(SRC, f)).join(" → "));
      return;
    }
    state.set(file, "open");
    for (const target of graph.get(file) ?? []) visit(target, [...path, file]);
    state.set(file, "done");
  };
  for (const file of graph.keys()) visit(file, []);
  return out;
}

/**
 * Inside src/lock/: resending until answered at the bottom, then the line's requests, the lease, the holdings,
 * one acquisition, the recipes (which never import each other), and the few files that tie them together.
 */
const RECIPES = ["mutex", "election", "semaphore", "rwlock", "lock-all"] as const;
const LOCK_ALLOWED: Record<string, readonly string[]> = {
  resend: [],
  line: ["resend"],
  lease: ["resend", "line"],
  hold: ["resend", "line", "lease"],
  acquire: ["resend", "line", "lease", "hold"],
  ...Object.fromEntries(RECIPES.map((recipe) => [recipe, ["resend", "line", "lease", "hold", "acquire"]])),
  // What an operator does to any recipe's line: inspect it, revoke a holding, ask for a release.
  operate: ["resend", "line", "lease", "hold", "acquire"],
  // Loose files in src/lock/ (the Session's factories, withLock): above every folder.
  loose: ["resend", "line", "lease", "hold", "acquire", "operate", ...RECIPES],
};
const LOCK = join(SRC, "lock");
/** At most this many files directly in src/lock/: the rest live in folders that name their concept. */
const MAX_LOOSE_LOCK_FILES = 6;

function lockRoomOf(file: string): string | undefined {
  const path = relative(LOCK, file);
  if (path.startsWith("..")) return undefined;
  return path.includes("/") ? path.split("/")[0]! : "loose";
}

/** Imports inside src/lock/ that go up or sideways (a recipe importing another, a folder importing its user). */
function upwardLockImports(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const out: string[] = [];
  for (const [file, targets] of graph) {
    const from = lockRoomOf(file);
    if (from === undefined) continue;
    for (const target of targets) {
      const to = lockRoomOf(target);
      if (to === undefined || to === from) continue;
      if (!(LOCK_ALLOWED[from] ?? []).includes(to))
        out.push(`${relative(SRC, file)} (${from}) → ${relative(SRC, target)} (${to})`);
    }
  }
  return out;
}

const files = sourceFiles(SRC);
const graph = new Map(files.map((file) => [file, importsOf(file)]));

describe("the layers of src/", () => {
  it("reads every file's imports (the check is not vacuous)", () => {
    expect(files.length).toBeGreaterThan(50);
    const edges = [...graph.values()].flat();
    expect(edges.length).toBeGreaterThan(200);
    for (const target of edges)
      expect(files, `import of a file that is not in src/: ${relative(SRC, target)}`).toContain(target);
    for (const file of files)
      expect(ALLOWED, `a room without rules: ${relative(SRC, file)}`).toHaveProperty(roomOf(file));
  });

  it("imports only downward: each room imports itself and the rooms below it", () => {
    expect(upwardImports(graph)).toEqual([]);
  });

  it("has no import circle", () => {
    expect(circles(graph)).toEqual([]);
  });

  it("inside src/lock/, imports go down only and no recipe imports another", () => {
    for (const file of files) {
      const room = lockRoomOf(file);
      if (room !== undefined)
        expect(LOCK_ALLOWED, `a lock folder without rules: ${relative(SRC, file)}`).toHaveProperty(room);
    }
    expect(upwardLockImports(graph)).toEqual([]);
  });

  it(`src/lock/ keeps at most ${MAX_LOOSE_LOCK_FILES} loose files`, () => {
    const loose = files.filter((file) => lockRoomOf(file) === "loose");
    expect(loose.length, loose.map((file) => relative(SRC, file)).join(", ")).toBeLessThanOrEqual(MAX_LOOSE_LOCK_FILES);
  });

  it("the lock checks find a recipe importing another, and a folder importing its user", () => {
    const at = (path: string) => join(SRC, path);
    const bad = new Map([
      [at("lock/semaphore/semaphore.ts"), [at("lock/mutex/mutex.ts"), at("lock/line/join.ts")]],
      [at("lock/lease/lease-session.ts"), [at("lock/hold/held.ts")]],
    ]);
    expect(upwardLockImports(bad)).toEqual([
      "lock/semaphore/semaphore.ts (semaphore) → lock/mutex/mutex.ts (mutex)",
      "lock/lease/lease-session.ts (lease) → lock/hold/held.ts (hold)",
    ]);
  });

  it("the checks find an upward import and a circle when there is one", () => {
    const at = (path: string) => join(SRC, path);
    const bad = new Map([
      [at("gateway/transport.ts"), [at("lock/mutex.ts")]],
      [at("lock/mutex.ts"), [at("lock/held.ts")]],
      [at("lock/held.ts"), [at("lock/mutex.ts")]],
    ]);
    expect(upwardImports(bad)).toEqual(["gateway/transport.ts (gateway) → lock/mutex.ts (lock)"]);
    expect(circles(bad)).toEqual(["lock/mutex.ts → lock/held.ts → lock/mutex.ts"]);
  });
});
