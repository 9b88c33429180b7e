#!/usr/bin/env bash
# `npm run bench`: side-by-side measurements against one real etcd (started here unless ETCD_ENDPOINTS is set).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/env.sh

ensure_node >&2
ensure_deps >&2
[ -n "${ETCD_ENDPOINTS:-}" ] || ensure_etcd >&2
npm run --silent build >/dev/null
node bench/lock-bench.mjs
