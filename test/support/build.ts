// Whether dist/ is the code as it is now: the projects that run the built package (runtimes, chaos) ask before
// they test it. No vitest import: a global setup loads it.
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** The entry `npm run build` writes. */
export const DIST_ENTRY = join(ROOT, "dist", "index.js");

/** Newest modification time of the files under `dir`. */
export function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
  }
  return newest;
}

/** Whether dist/index.js exists and no file under src/ is newer. */
export function distIsCurrent(): boolean {
  return existsSync(DIST_ENTRY) && statSync(DIST_ENTRY).mtimeMs >= newestMtime(join(ROOT, "src"));
}
