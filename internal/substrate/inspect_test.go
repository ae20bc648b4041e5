package substrate

import (
	"maps"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/rtnl"
)

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
	if shaped(p) {
		t.Errorf("a plan without rates is shaped")
	}
	p.Links[1].Rate = 1e6
	if !shaped(p) {
		t.Errorf("a plan with a rate is not shaped")
	}
}
