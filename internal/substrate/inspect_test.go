package substrate

import (
	"maps"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/rtnl"
)

// TestShaped checks that inspect reads the shapers' drops only for a plan with a rate cap.
func TestShaped(t *testing.T) {
	p := &plan.Plan{Links: []*plan.Link{{}, {}}}
	if shaped(p) {
		t.Errorf("a plan without rates is shaped")
	}
	p.Links[1].Rate = 1e6
	if !shaped(p) {
		t.Errorf("a plan with a rate is not shaped")
	}
}

// TestNodeNsIDs checks which nodes' namespace ids inspect takes from their ports' peers: only
// those whose ports all have a peer, all in one namespace.
func TestNodeNsIDs(t *testing.T) {
	link := func(ports ...plan.Port) *plan.Link { return &plan.Link{Ports: ports} }
	port := func(node, name string) plan.Port { return plan.Port{Node: node, Name: name} }
	devs := map[string]rtnl.Link{
		"pa1": {PeerNetNsID: 3}, "pa2": {PeerNetNsID: 3}, // a: two ports, one namespace
		"pb1": {PeerNetNsID: 4}, "pb2": {PeerNetNsID: 9}, // b: ports in two namespaces
		"pc1": {PeerNetNsID: -1}, // c: a port without a peer elsewhere (a tap)
		"pe1": {PeerNetNsID: 0},  // e: id 0 is an id
	}
	p := &plan.Plan{Links: []*plan.Link{
		link(port("a", "pa1"), port("b", "pb1")),
		link(port("a", "pa2"), port("b", "pb2")),
		link(port("c", "pc1"), port("d", "pd1")), // d: its port is missing
		link(port("e", "pe1")),
	}}
	want := map[string]int{"a": 3, "e": 0}
	if got := nodeNsIDs(p, devs); !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestParseNetDev reads /proc/net/dev as Linux 6.x prints it.
func TestParseNetDev(t *testing.T) {
	const in = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     840      10    0    0    0     0          0         0      840      10    0    0    0     0       0          0
  eth1: 1234567    8901    1    2    0     0          0         3  7654321     4321    0    5    0     0       0          0
broken: 1 2 3
`
	got := parseNetDev([]byte(in))
	want := map[string]rtnl.Stats{
		"lo":   {RxBytes: 840, RxPackets: 10, TxBytes: 840, TxPackets: 10},
		"eth1": {RxBytes: 1234567, RxPackets: 8901, RxDropped: 2, TxBytes: 7654321, TxPackets: 4321, TxDropped: 5},
	}
	if !maps.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
