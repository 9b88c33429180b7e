#!/usr/bin/env bash
# The whole test suite (`npm test`). One gate per line; the first failure stops the run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/env.sh

ensure_node
ensure_deps
# etcd 3.4 (the system's), 3.5 (fetched into .cache/etcd), 3.6 and 3.7 (built there from etcd's Go modules, with
# the Go peer and the chaos run's linearizability checker): the etcd-3.x projects run on them.
ensure_etcd_versions
# nginx, HAProxy and Caddy (Debian's): the proxy-* projects run the suites through each.
ensure_proxies
# Postgres and moto: the stores project fences writes to them (SQLite, D1 and R2 need nothing more).
ensure_stores

step() {
  echo
  echo "==> $*"
  "$@"
}

step npx tsc --noEmit -p tsconfig.json
step npx tsc --noEmit -p tsconfig.test.json
# Biome (format and lint) and the 120-column line limit: `npm run format` fixes what it can.
step npm run --silent lint
step npm run --silent build
# The API reference: every public export documented, TypeDoc's warnings are errors.
step npm run --silent docs

# Packaging gates: the package as npm would publish it, its types as each resolver sees them, and the
# size of every entry against size-budget.json.
step npx publint --strict
step npx attw --pack . --profile esm-only
step node scripts/size.mjs

mkdir -p .cache
rm -f .cache/vitest-results.json
status=0
step npx vitest run --reporter=default --reporter=json --outputFile.json=.cache/vitest-results.json || status=$?
# One plain closing line for CI, whether the run passed or not: every vitest project counted together.
node -e 'const r = require("./.cache/vitest-results.json"); console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests} skipped`)' ||
  echo "vitest wrote no results (exit $status)"
[ "$status" -eq 0 ] || exit "$status"

echo
echo "==> all gates passed"
