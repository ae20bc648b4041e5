//go:build integration

package integration

import (
	"testing"
)

// TestLANFlood: on the eBPF LAN connector, a broadcast from each of three members reaches both
// others, so ARP resolves between every pair. On Linux 6.1 a flood once reached only the last
// member it found (internal/dataplane/bpf/lan.c, flood); TestGuestKernel runs this there.
func TestLANFlood(t *testing.T) {
	e := start(t)
	path := writeTopo(t, lanTopo("flood", "lan", "a", "b", "c"))
	mustTrellis(t, e.state, "up", path)
	addrs := map[string]string{"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.0.3"}
	for _, from := range []string{"a", "b", "c"} {
		// No neighbour entry: the first ping to each member starts with a broadcast ARP request.
		mustExec(t, e.state, "flood", from, "ip", "neigh", "flush", "dev", "eth1")
		for _, to := range []string{"a", "b", "c"} {
			if to == from {
				continue
			}
			if err := tryPing(t, e.state, "flood", from, addrs[to]); err != nil {
				t.Errorf("%s's ARP request (a broadcast) did not reach %s on a LAN of three: %v", from, to, err)
			}
		}
	}
	mustTrellis(t, e.state, "down", "flood")
	e.assertClean()
}
