package substrate

import (
	"reflect"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
)

// A live change reconfigures a node's interface only when its addresses change, and then its
// addresses alone (not its sysctls and state: whole only after an interrupted change); it may
// remove only the addresses trellis placed (recorded plans), never others.
func TestOwnedAddresses(t *testing.T) {
	mk := func(rate uint64, down bool, r1 ...string) *plan.Plan {
		return &plan.Plan{Links: []*plan.Link{{Name: "s3", Rate: rate, Down: down, Ports: []plan.Port{
			{Node: "r1", Ifname: "eth1", Addresses: r1},
			{Node: "r2", Ifname: "eth1"},
			{Node: "r3", Ifname: "eth0", Down: down},
		}}}}
	}
	base := mk(0, false, "10.0.0.1/24")
	mtu := mk(0, false, "10.0.0.1/24")
	mtu.Links[0].MTU = 9000
	cases := []struct {
		name        string
		old, new    *plan.Plan
		recorded    []*plan.Plan
		port        int
		reconfigure bool
		whole       bool
		placed      []string
	}{
		{"rate change", base, mk(1e9, false, "10.0.0.1/24"), nil, 0, false, false, []string{"10.0.0.1/24"}},
		{"mtu change", base, mtu, nil, 0, false, false, []string{"10.0.0.1/24"}},
		{"link down", base, mk(0, true, "10.0.0.1/24"), nil, 1, false, false, nil},
		{"address removed from the file", base, mk(0, false), nil, 0, true, false, []string{"10.0.0.1/24"}},
		{"address added to the file", mk(0, false), base, nil, 0, true, false, nil},
		{"interrupted change: trust the records only", nil, base, []*plan.Plan{mk(0, false, "10.0.0.7/24")}, 0, true, true, []string{"10.0.0.7/24"}},
		{"rolled back change's target is trellis's", base, base, []*plan.Plan{mk(0, false, "10.0.0.8/24")}, 0, false, false, []string{"10.0.0.1/24", "10.0.0.8/24"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &applier{old: c.old, recorded: c.recorded}
			port := c.new.Links[0].Ports[c.port]
			if again, whole := a.reconfigure(port); again != c.reconfigure || whole != c.whole {
				t.Errorf("reconfigure(%s) = %v, whole %v; want %v, whole %v", port, again, whole, c.reconfigure, c.whole)
			}
			if got := a.placed(port); !reflect.DeepEqual(got, c.placed) {
				t.Errorf("placed(%s) = %v, want %v", port, got, c.placed)
			}
		})
	}
}
