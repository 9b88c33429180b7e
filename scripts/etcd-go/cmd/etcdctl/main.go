// etcdctl of the same version, as etcd's etcdctl/main.go builds it.
package main

import "go.etcd.io/etcd/etcdctl/v3/ctlv3"

func main() { ctlv3.MustStart() }
