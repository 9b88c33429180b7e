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
step npx tsc --noEmit -p tsconfig.test.json
step npm run --silent build

# Packaging gates: the package as npm would publish it, its types as each resolver sees them, and the
# size of every entry against size-budget.json.
step npx publint --strict
step npx attw --pack . --profile esm-only
step node scripts/size.mjs

step npx vitest run

echo
echo "==> all gates passed"
