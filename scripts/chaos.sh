#!/usr/bin/env bash
# `npm run chaos [-- --duration 450 --seed N --workers K --faults a,b|none --etcd 3.7 --no-fence]`: a 3-member
# loopback etcd cluster behind fault proxies, worker processes on the built package, the fence control's rounds
# on each store, faults on a seeded schedule, then the checks (test/chaos/run.ts). Exit code 0 when every check passes, 1 when one fails, 2 when the run could not
# be carried out.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/env.sh

ensure_node >&2
ensure_deps >&2
# Every version: --etcd picks the cluster's, and the linearizability checker is built with the Go-built ones.
ensure_etcd_versions >&2
# The fence control's stores (test/chaos/fence-rounds.ts): Postgres and moto; `--no-fence` runs without them.
ensure_stores >&2
npm run --silent build >/dev/null
exec node test/chaos/run.ts "$@"
