#!/usr/bin/env bash
# The whole test suite (`npm test`). One gate per line; the first failure stops the run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/env.sh

ensure_node
ensure_deps
ensure_etcd

step() {
  echo
  echo "==> $*"
  "$@"
}

step npx tsc --noEmit -p tsconfig.json
step npx tsup

# --- packaging gates go here (one `step ...` line each), e.g. publint, attw ---

step npx vitest run

echo
echo "==> all gates passed"
