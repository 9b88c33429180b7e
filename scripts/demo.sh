#!/usr/bin/env bash
# The demo (`npm run demo`): the inventory oversell, without and with the lock.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/env.sh

ensure_node >&2
ensure_deps >&2
npm run --silent build >/dev/null
node examples/demo/inventory.mjs
