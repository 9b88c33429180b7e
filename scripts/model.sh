#!/usr/bin/env bash
# `npm run model [-- --runs 2000 --seed N --on mock|mock-3.6|3.4|3.7 --only open,lock,release]`: the model-based
# search of test/conformance/conformance-model.test.ts, longer than `npm test` runs it, from a seed. `--on` picks
# the backend: mock (its dialect 3.4, the default), mock-3.x (another dialect) or 3.x (a real member of that
# version). `--only` narrows what the sequences do. Each run prints its seed first; a failure prints its shrunk
# sequence too (on the mock: a real member's runs end at the first failure). Pass the seed back to replay it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/env.sh

runs=2000 seed="" on=mock only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --on) on="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    *) echo "model: unknown argument $1 (see scripts/model.sh)" >&2; exit 2 ;;
  esac
done

ensure_node >&2
ensure_deps >&2
case "$on" in
  mock | mock-3.4) project=unit ;;
  mock-*) project="unit-${on#mock-}" ;;
  *)
    ensure_etcd_versions >&2
    project="etcd-$on"
    ;;
esac
export ETCD_EDGE_MODEL_RUNS="$runs" ETCD_EDGE_MODEL_SEED="$seed"
[ -n "$only" ] && export ETCD_EDGE_MODEL_ONLY="$only"
exec npx vitest run --project "$project" test/conformance/conformance-model.test.ts
