// The module root of the Go tools the tests build (a real etcd member, etcdctl, the Go peer). Each etcd version
// pins its own dependencies in etcd-<version>.mod / .sum, chosen with `go build -modfile`
// (scripts/lib/etcd-versions.sh); go only reads this file to find the module's root.
module etcd-edge.test/etcd-go

go 1.26.0
