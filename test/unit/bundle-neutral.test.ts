// The SDK must bundle for a platform-neutral target (Workers, Deno, browsers, Lambda): no Node builtins
// anywhere in the module graph, and no `Buffer` / `process.` in the output.
import { builtinModules } from "node:module";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build, type Metafile } from "esbuild";
import { describe, expect, it } from "vitest";
import { neutralBundle, REPO_ROOT as root } from "../support/neutral-bundle.js";

const entry = fileURLToPath(new URL("../../src/index.ts", import.meta.url));

const BUILTINS = new Set(builtinModules.flatMap((name) => [name, name.replace(/^node:/, "")]));

function isNodeBuiltin(path: string): boolean {
  if (path.startsWith("node:")) return true;
  const bare = path.split("/")[0]!;
  return BUILTINS.has(path) || BUILTINS.has(bare);
}

const options = neutralBundle(entry);

function offendingImports(metafile: Metafile): string[] {
  const bad: string[] = [];
  for (const [input, info] of Object.entries(metafile.inputs)) {
    if (isNodeBuiltin(input)) bad.push(`input ${input}`);
    for (const imported of info.imports) {
      if (isNodeBuiltin(imported.path) || imported.external)
        bad.push(`${input} imports ${imported.path}${imported.external ? " (external)" : ""}`);
    }
  }
  for (const [output, info] of Object.entries(metafile.outputs)) {
    for (const imported of info.imports) {
      if (isNodeBuiltin(imported.path) || imported.external) bad.push(`${output} imports ${imported.path}`);
    }
  }
  return bad;
}

describe("platform-neutral bundle of src/index.ts", () => {
  it("has no Node builtin in its module graph and no Buffer / process. in its output", async () => {
    const result = await build(options);
    expect(result.errors).toEqual([]);
    expect(offendingImports(result.metafile!)).toEqual([]);
    const text = result.outputFiles![0]!.text;
    expect(text.length).toBeGreaterThan(1_000);
    expect(text.match(/.{0,60}\bBuffer\b.{0,60}/g) ?? []).toEqual([]);
    expect(text.match(/.{0,60}\bprocess\..{0,60}/g) ?? []).toEqual([]);
    // Sanity: the bundle really contains the client.
    expect(text).toContain("/v3/kv/range");
    // diagnostics_channel and crypto are asked of the runtime, guarded, never imported: the only mentions of a
    // builtin.
    expect(text.match(/node:/g)).toHaveLength(2);
    expect(text).toMatch(/globalThis\.process\?\.getBuiltinModule\?\.\(\s*"node:diagnostics_channel"\s*\)/);
    expect(text).toMatch(/globalThis\.process\?\.getBuiltinModule\?\.\(\s*"node:crypto"\s*\)/);
  });

  it("reports the minified + gzipped size", async () => {
    const result = await build({ ...options, minify: true });
    expect(offendingImports(result.metafile!)).toEqual([]);
    const bytes = result.outputFiles![0]!.contents;
    const gzipped = gzipSync(bytes, { level: 9 }).length;
    const inputs = Object.keys(result.metafile!.inputs).length;
    console.log(
      `etcd-edge bundle (platform neutral, minified): ${bytes.length} B, gzipped ${gzipped} B, from ${inputs} modules`,
    );
    expect(gzipped).toBeGreaterThan(0);
  });

  it("the checker itself catches a Node builtin (so a pass means something)", async () => {
    const result = await build({
      ...options,
      entryPoints: undefined,
      stdin: {
        contents: `import { createHash } from "node:crypto"; import fs from "fs"; export const x = [createHash, fs];`,
        resolveDir: root,
        loader: "ts",
      },
      external: ["node:*", "fs"],
    });
    expect(offendingImports(result.metafile!).length).toBeGreaterThanOrEqual(2);
  });
});
