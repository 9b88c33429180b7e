#!/usr/bin/env bash
# `npm run mutate [-- <stryker options>]`: how much of the lock core the fast mock-backed suites can see. StrykerJS
# mutates src/lock (stryker.config.mjs) and runs, for each mutant, the tests of vitest.mutate.config.ts that cover
# it; a mutant that no test fails survives. Incremental: a rerun tests only what changed since the last one
# (.cache/stryker/incremental.json). The model search runs a short fixed budget from a fixed seed, so a mutant's
# verdict does not depend on the draw. Then the score per folder and the survivors (scripts/mutation-report.mjs);
# docs/mutation.md says why each listed survivor cannot change behaviour.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/env.sh

ensure_node >&2
ensure_deps >&2
export ETCD_EDGE_MODEL_RUNS="${ETCD_EDGE_MODEL_RUNS:-30}" ETCD_EDGE_MODEL_SEED="${ETCD_EDGE_MODEL_SEED:-37}"
npx stryker run "$@"
node scripts/mutation-report.mjs .cache/stryker/mutation.json
