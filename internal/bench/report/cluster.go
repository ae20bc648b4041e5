package report

import (
	"fmt"
	"strings"

	"github.com/trellisnet/trellis/internal/bench/result"
)

// clusterSection is the cluster part: up to converged, etcd writes, failover.
func clusterSection(b *strings.Builder, rep *result.Report, _ string) {
	c := rep.Cluster
	if c == nil {
		return
	}
	run := "a full run"
	if c.Quick {
		run = "a --quick run"
	}
	fmt.Fprintf(b, "## Cluster\n\n"+
		"%d simulated machines (network namespaces on one bridge), each with its own `trellis agent --placer`\n"+
		"(one placer leads), and a 3-member etcd with TLS in the underlay namespace; networks are chains\n"+
		"of %d nodes, put up with `trellis --cluster FILE up` (%d at once, each waiting until every agent\n"+
		"converged). Writes are etcd revisions over the ups (agents' counters off). From %s, load\n"+
		"average %.1f at its start%s.\n\n",
		c.Machines, c.Nodes, c.Parallel, run, c.Load1, loaded(c.Load1))
	b.WriteString("| networks | up to every agent converged (s) | etcd writes | writes per network |\n|---|---|---|---|\n")
	for _, u := range c.Up {
		fmt.Fprintf(b, "| %d | %s | %d | %s |\n", u.Networks, result.FormatF(u.Seconds, 2), u.Writes, result.FormatF(u.WritesPerNetwork, 1))
	}
	if f := c.Failover; f != nil {
		fmt.Fprintf(b, "\nFailover: machine %s lost (its agent killed, its cable pulled) while it held %d nodes of %d\n"+
			"networks; every network placed on the other machines and converged there after %ss (lease %gs).\n",
			f.Machine, f.Nodes, f.Networks, result.FormatF(f.Seconds, 2), c.LeaseSeconds)
		if f.PlacedSeconds > 0 {
			fmt.Fprintf(b, "Every network's placement had left the lost machine after %ss.\n", result.FormatF(f.PlacedSeconds, 2))
		}
	}
	b.WriteString("\n")
}

// loaded marks figures measured on a busy machine.
func loaded(load1 float64) string {
	if load1 >= 1 {
		return ": a loaded machine, the figures are noisy"
	}
	return ""
}
