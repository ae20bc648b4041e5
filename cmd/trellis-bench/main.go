// Command trellis-bench is the router tester of Trellis (internal/bench) and its report: it
// measures how fast this machine forwards through trellis's virtual networks, and remakes the
// plots and docs/benchmarks.md from a run's bench.json. It is a program of its own so that
// trellis links none of it (plots, the test cluster's etcd, `testing`). It builds its networks
// with trellis's packages and runs the trellis binary for what trellis runs as processes.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "trellis-bench:", err)
		os.Exit(1)
	}
}
