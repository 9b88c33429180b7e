// A real etcd member, built from etcd's own server module at the version go.mod pins: etcd's server/main.go is
// this call.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
