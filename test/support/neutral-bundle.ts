// How the bundle tests build an entry for a platform-neutral host (Workers, Deno, browsers): as a user's
// bundler would, with nothing written to disk and the module graph kept for inspection. scripts/size.mjs
// builds the same way (and minifies) for the size gate.
import { fileURLToPath } from "node:url";
import type { BuildOptions } from "esbuild";

/** The repository's root: entries are given relative to it. */
export const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** esbuild options for `entry` bundled for a neutral platform, with its metafile. */
export function neutralBundle(entry: string): BuildOptions & { metafile: true; write: false } {
  return {
    entryPoints: [entry],
    absWorkingDir: REPO_ROOT,
    platform: "neutral",
    bundle: true,
    format: "esm",
    write: false,
    // base64-js has only "main"; "neutral" has no default main fields.
    mainFields: ["module", "main"],
    metafile: true,
    logLevel: "silent",
  };
}
