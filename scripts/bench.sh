#!/usr/bin/env bash
# `npm run bench [-- --only 4,5 --<knob> value ...]`: etcd-edge side by side with its raw floors and etcd3,
# against one real etcd (started here unless ETCD_ENDPOINTS is set). `npm run bench -- --help` lists the knobs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/env.sh

ensure_node >&2
ensure_deps >&2
[ -n "${ETCD_ENDPOINTS:-}" ] || ensure_etcd >&2
npm run --silent build >/dev/null
node bench/main.mjs "$@"
