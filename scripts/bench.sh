#!/usr/bin/env bash
# `npm run bench [-- --etcd 3.7 --only 4,5 --<knob> value ...]`: etcd-edge side by side with its raw floors,
# etcd3 and Go's own concurrency package, against one real etcd (started here unless ETCD_ENDPOINTS is set).
# `--etcd` (or BENCH_ETCD) picks the member's version, 3.7 by default, got as the tests get it: 3.6 and 3.7
# come with the Go peer. `npm run bench -- --help` lists the knobs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/env.sh

version="${BENCH_ETCD:-3.7}"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --etcd) version="${2:?--etcd needs a version: 3.4, 3.5, 3.6 or 3.7}"; shift 2 ;;
    --etcd=*) version="${1#--etcd=}"; shift ;;
    *) args+=("$1"); shift ;;
  esac
done

ensure_node >&2
ensure_deps >&2
if [ -z "${ETCD_ENDPOINTS:-}" ]; then
  case "$version" in
    3.4 | 3.5 | 3.6 | 3.7) dir="$("ensure_etcd_${version/./}")" ;;
    *) echo "bench: --etcd takes 3.4, 3.5, 3.6 or 3.7, not $version" >&2; exit 2 ;;
  esac
  # The member the bench starts is the `etcd` first on PATH: a directory holding that one binary alone, so
  # nothing else of $dir (the system's /usr/bin for 3.4) moves ahead on PATH.
  only="$ETCD_EDGE_ROOT/.cache/bench-etcd-$version"
  mkdir -p "$only"
  ln -sf "$dir/etcd" "$only/etcd"
  export PATH="$only:$PATH"
  [ -x "$dir/peer" ] && export ETCD_EDGE_GO_PEER="$dir/peer"
fi
npm run --silent build >/dev/null
node bench/main.mjs "${args[@]}"
