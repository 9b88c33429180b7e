// etcd-edge/testing must load wherever the SDK does (Workers, Deno, browsers): bundled for a neutral platform it
// has no Node builtin, no msw, no `Buffer` and no `process.`. Only etcd-edge/testing/msw imports msw, and only
// etcd-edge/testing/server imports Node's modules.
import { builtinModules } from "node:module";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";
import { neutralBundle } from "../support/neutral-bundle.js";

const BUILTINS = new Set(builtinModules.flatMap((name) => [name, `node:${name}`]));

/** Every import the bundle leaves to its host, and the bundle's text. */
async function bundle(entry: string): Promise<{ external: string[]; text: string }> {
  const result = await build({ ...neutralBundle(entry), external: ["msw", "node:*", ...builtinModules] });
  const external = Object.values(result.metafile.inputs).flatMap((i) =>
    i.imports.filter((x) => x.external).map((x) => x.path),
  );
  return { external: [...new Set(external)].sort(), text: result.outputFiles[0]!.text };
}

describe("entries of the testing kit", () => {
  it("etcd-edge/testing: nothing from Node, nothing from msw, no Buffer or process", async () => {
    const { external, text } = await bundle("src/testing/index.ts");
    expect(external).toEqual([]);
    expect(text.match(/.{0,60}\bBuffer\b.{0,60}/g) ?? []).toEqual([]);
    expect(text.match(/.{0,60}\bprocess\..{0,60}/g) ?? []).toEqual([]);
    // Sanity: the bundle is the mock.
    expect(text).toContain("/v3/lock/lock");
  });

  it(
    "etcd-edge/testing/msw imports msw and nothing from Node; " + "etcd-edge/testing/server imports Node only",
    async () => {
      expect((await bundle("src/testing/msw.ts")).external).toEqual(["msw"]);
      const server = await bundle("src/testing/server/index.ts");
      expect(server.external.length).toBeGreaterThan(0);
      expect(server.external.filter((x) => !BUILTINS.has(x))).toEqual([]);
    },
  );
});
