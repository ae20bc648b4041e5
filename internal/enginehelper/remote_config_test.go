package enginehelper

import (
	"slices"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// The node's machine's helper knows its remote engine's machine and address; the other
// machine's holder holds that engine, towards the node's machine, with the node's interfaces.
func TestRemoteConfigs(t *testing.T) {
	doc := `name: cr
hosts:
  m1: {address: 198.18.0.1}
  m2: {address: 198.18.0.2}
nodes:
  r:
    host: m1
    engines: [{}, {host: m2}]
  a: {host: m1}
links:
  - endpoints: [a:eth1, r:eth1]
`
	n, err := spec.Parse("cr.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	p1, err := plan.Make(n, "s1", "m1", &plan.Names{})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := plan.Make(n, "s2", "m2", &plan.Names{})
	if err != nil {
		t.Fatal(err)
	}
	c1, err := ConfigFor("/state", p1, p1.Node("r"), 1)
	if err != nil {
		t.Fatal(err)
	}
	c2 := HostedConfig("/state2", p2, p2.HostedNode("r"))
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"m1 peers", c1.Peers["m2"], "198.18.0.2"},
		{"m1 local", c1.Local, "198.18.0.1"},
		{"m1 network", c1.Network, "cr"},
		{"m1 engine 0 here", c1.remote(0), false},
		{"m1 engine 1 remote", c1.remote(1), true},
		{"m2 home", c2.Home, "198.18.0.1"},
		{"m2 local", c2.Local, "198.18.0.2"},
		{"m2 holds engine 1", slices.Equal(c2.Here, []int{1}), true},
		{"m2 holder's FEs are its own", c2.remote(1), false},
		{"m2 interface", c2.Ifaces[0].Name + " " + c2.Ifaces[0].MAC, "eth1 " + plan.MAC("cr", "r", "eth1")},
		{"m2 not a control node", c2.Control, 0},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if len(c1.Ifaces) != 1 || len(c1.Ifaces[0].FEPorts) != 2 {
		t.Fatalf("m1 interfaces %+v; want eth1 with an end per engine", c1.Ifaces)
	}
}
