// Stops a run on a Node older than the suite needs, at once and saying which: without it, Node 20 runs the unit
// tests for minutes and fails hundreds of them on `Map.groupBy` and its kin. vitest.config.ts loads it first.

/** The oldest Node the package and its tests run on (package.json's `engines`). */
export const MIN_NODE_MAJOR = 22;

/** The message for `version` (process.versions.node) when it is too old, else undefined. */
export function nodeTooOld(version) {
  const major = Number(version.split(".")[0]);
  if (major >= MIN_NODE_MAJOR) return undefined;
  return (
    `etcd-edge's tests need Node ${MIN_NODE_MAJOR} or newer; this is Node ${version}. ` +
    "Use Node 24 (`bash scripts/test.sh` installs it into .tools/node24 when missing) and run again."
  );
}

const problem = nodeTooOld(process.versions.node);
if (problem !== undefined) {
  console.error(problem);
  process.exit(1);
}
