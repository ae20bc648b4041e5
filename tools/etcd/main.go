// Command etcd is etcd's own server (go.etcd.io/etcd/server/v3/etcdmain), built from its Go
// modules at the version go.mod pins, so that a cluster of trellis machines, the tests and a try
// on one machine get etcd 3.6 or later where the distribution ships an older one.
// scripts/setup.sh builds it into its cache directory (see docs/cluster.md).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
