// Test helpers live in one place: test/support/ (and the conformance setup in test/conformance/backend.ts). A
// test file that declares its own b64, sleep, client... instead of importing the shared one fails here, so the
// copies cannot come back. Read with TypeScript's parser, so a copy nested in a describe block is found too.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const SUPPORT = join(ROOT, "test/support");

/**
 * The shared helpers a test file may not declare again, each with the module that has it. `use` names the
 * shared helper where the local name is an old one for the same idea. `except`: where the word means another
 * thing, and why.
 */
const SHARED: Record<string, { home: string; use?: string; except?: { under: string; why: string } }> = {
  b64: { home: "wire.ts" },
  unb64: { home: "wire.ts" },
  prefixEnd: { home: "wire.ts" },
  sleep: { home: "time.ts" },
  wallNow: { home: "time.ts" },
  until: { home: "async.ts" },
  within: { home: "async.ts" },
  stillPending: { home: "async.ts" },
  rejection: { home: "async.ts" },
  typedError: { home: "async.ts", use: "rejection" },
  client: { home: "etcd.ts" },
  useSessions: { home: "etcd.ts" },
  uniqueName: { home: "etcd.ts" },
  fresh: { home: "etcd.ts", use: "freshNames" },
  freshNames: { home: "etcd.ts" },
  leaseAlive: { home: "etcd.ts" },
  leaseExists: { home: "etcd.ts", use: "leaseAlive" },
  leaseGone: { home: "etcd.ts", use: "leaseAlive" },
  lineLength: { home: "etcd.ts" },
  untilLineLength: { home: "etcd.ts" },
  keysUnder: { home: "etcd.ts" },
  recordingFetch: { home: "etcd.ts" },
  mockClient: { home: "mock.ts" },
  counted: { home: "mock.ts", use: "mockClient" },
  call: {
    home: "mock.ts",
    except: { under: "test/chaos/", why: "a chaos worker's call is one SDK call it reports (events.ts's CallEvent)" },
  },
  gatewayClient: { home: "gateway.ts" },
  stubFetch: { home: "gateway.ts" },
  directFetch: { home: "gateway.ts" },
  connectionReset: { home: "gateway.ts" },
  killedWithParent: { home: "processes.ts" },
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" ? [] : sourceFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

function parse(file: string, text = readFileSync(file, "utf8")): ts.SourceFile {
  return ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
}

const isFunction = (node: ts.Node | undefined): boolean =>
  node !== undefined && (ts.isArrowFunction(node) || ts.isFunctionExpression(node));

/** Every function a file declares, at any depth: `function f`, and `const f = (...) =>` or `= function`. */
function declaredFunctions(source: ts.SourceFile): Array<{ name: string; line: number }> {
  const found: Array<{ name: string; line: number }> = [];
  const add = (name: ts.Identifier) =>
    found.push({ name: name.text, line: source.getLineAndCharacterOfPosition(name.getStart()).line + 1 });
  const visit = (node: ts.Node) => {
    if (ts.isFunctionDeclaration(node) && node.name) add(node.name);
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && isFunction(node.initializer)) add(node.name);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The names a module exports: its exported functions and consts, and what it re-exports by name. */
function exportedNames(source: ts.SourceFile): Set<string> {
  const names = new Set<string>();
  for (const statement of source.statements) {
    const exported = ts.canHaveModifiers(statement)
      ? (ts.getModifiers(statement) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword)
      : false;
    if (exported && ts.isFunctionDeclaration(statement) && statement.name) names.add(statement.name.text);
    if (exported && ts.isVariableStatement(statement))
      for (const d of statement.declarationList.declarations) if (ts.isIdentifier(d.name)) names.add(d.name.text);
    if (ts.isExportDeclaration(statement) && statement.exportClause && ts.isNamedExports(statement.exportClause))
      for (const element of statement.exportClause.elements) names.add(element.name.text);
  }
  return names;
}

/** Files whose helpers would be copies: every .ts under test/ but the shared modules, and the examples' tests. */
const checked = [
  ...sourceFiles(join(ROOT, "test")).filter((file) => !file.startsWith(`${SUPPORT}/`)),
  ...sourceFiles(join(ROOT, "examples")).filter((file) => file.endsWith(".test.ts")),
].filter((file) => relative(ROOT, file) !== "test/conformance/backend.ts");

/** `file:line name (shared: support/home)` for each copy of a shared helper in `source`. */
function copies(source: ts.SourceFile): string[] {
  const path = relative(ROOT, source.fileName);
  return declaredFunctions(source).flatMap(({ name, line }) => {
    const shared = Object.hasOwn(SHARED, name) ? SHARED[name] : undefined;
    if (shared === undefined || (shared.except !== undefined && path.startsWith(shared.except.under))) return [];
    return [`${path}:${line} ${name} (import ${shared.use ?? name} from test/support/${shared.home})`];
  });
}

describe("test helpers in one place", () => {
  it("reads the test files and the shared modules (the check is not vacuous)", () => {
    expect(checked.length).toBeGreaterThan(80);
    expect(checked.map((file) => relative(ROOT, file))).toContain("test/unit/layers.test.ts");
    const functions = checked.flatMap((file) => declaredFunctions(parse(file)));
    expect(functions.length).toBeGreaterThan(300);
  });

  it("each shared helper is exported by the module this list names", () => {
    const missing = Object.entries(SHARED).flatMap(([name, { home, use }]) =>
      exportedNames(parse(join(SUPPORT, home))).has(use ?? name) ? [] : [`${use ?? name} in ${home}`],
    );
    expect(missing).toEqual([]);
  });

  it("no test file declares a shared helper of its own", () => {
    expect(checked.flatMap((file) => copies(parse(file)))).toEqual([]);
  });

  it("finds a copy at any depth, by declaration or by arrow, and leaves other names and other meanings alone", () => {
    const source = (path: string, text: string) => parse(join(ROOT, path), text);
    const test = [
      "const b64 = (s: string) => btoa(s);",
      'describe("x", () => { it("y", async () => { async function sleep(ms: number) {} }); });',
      "const fresh = function () { return 1; };",
      "const client = new Etcd({});",
      "const encode = (s: string) => btoa(s);",
      "function call(mock: unknown) {}",
    ].join("\n");
    expect(copies(source("test/unit/x.test.ts", test))).toEqual([
      "test/unit/x.test.ts:1 b64 (import b64 from test/support/wire.ts)",
      "test/unit/x.test.ts:2 sleep (import sleep from test/support/time.ts)",
      "test/unit/x.test.ts:3 fresh (import freshNames from test/support/etcd.ts)",
      "test/unit/x.test.ts:6 call (import call from test/support/mock.ts)",
    ]);
    expect(copies(source("test/chaos/worker.ts", "async function call() {}"))).toEqual([]);
  });
});
