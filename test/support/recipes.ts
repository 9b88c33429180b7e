// A doc's code blocks, run as a user would run them: in their runtime, in a child process, with the package's
// imports pointed at bundles of src/ and the doc's placeholder paths and addresses replaced by the test's.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";
import { REPO_ROOT } from "./neutral-bundle.js";

export { codeBlocks } from "./doc-blocks.ts";

/** `etcd …` command lines of a sh block, as argument lists without `etcd` (continuation lines joined). */
export function etcdCommands(block: string): string[][] {
  return block
    .replace(/\\\n/g, " ")
    .split("\n")
    .filter((line) => line.startsWith("etcd "))
    .map((line) => line.trim().split(/\s+/).slice(1));
}

/** The package's entries, bundled from src/ into `dir`, by the specifiers a recipe may import them by. */
export async function bundlePackage(dir: string): Promise<Record<string, string>> {
  const main = join(dir, "etcd-edge.mjs");
  const node = join(dir, "etcd-edge-node.mjs");
  const common = { bundle: true, format: "esm", logLevel: "silent", absWorkingDir: REPO_ROOT } as const;
  await build({ ...common, entryPoints: ["src/index.ts"], platform: "neutral", outfile: main });
  // undici bundled in too: the file must load from a temp dir. Its require() of Node's modules needs a require.
  const banner = 'import { createRequire } from "node:module"; const require = createRequire(import.meta.url);';
  await build({
    ...common,
    entryPoints: ["src/node/index.ts"],
    platform: "node",
    outfile: node,
    banner: { js: banner },
  });
  const url = (file: string) => pathToFileURL(file).href;
  return { "etcd-edge": url(main), "npm:etcd-edge": url(main), "etcd-edge/node": url(node) };
}

export interface Recipe {
  /** The doc's code. */
  code: string;
  /** Drop the lines that carry this comment (e.g. "mutual TLS only"). */
  drop?: string | undefined;
  /** Text replaced everywhere: the doc's placeholders by the test's values. */
  replace: Array<[string, string]>;
  /** Code run after the recipe's own, before its "// at shutdown:" lines. */
  then: string;
}

/**
 * Writes `recipe` into `file`: its imports of the package pointed at `bundles`, its placeholders replaced,
 * `then` added, and its commented-out shutdown lines run at the end.
 */
export function writeRecipe(file: string, recipe: Recipe, bundles: Record<string, string>): void {
  let code = recipe.code;
  for (const [specifier, url] of Object.entries(bundles)) code = code.replaceAll(`"${specifier}"`, `"${url}"`);
  for (const [from, to] of recipe.replace) code = code.replaceAll(from, to);
  const lines = code.split("\n").filter((line) => recipe.drop === undefined || !line.includes(`// ${recipe.drop}`));
  const shutdown = lines.filter((line) => line.startsWith("// at shutdown: ")).map((line) => line.slice(16));
  writeFileSync(file, [...lines, recipe.then, ...shutdown, ""].join("\n"));
}
