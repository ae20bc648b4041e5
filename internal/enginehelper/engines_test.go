package enginehelper

import (
	"slices"
	"strings"
	"testing"

	_ "github.com/trellisnet/trellis/internal/kinds/all"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

func configOf(t *testing.T, doc string) Config {
	t.Helper()
	n, err := spec.Parse("e.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(n, "scope", "", &plan.Names{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := ConfigFor("/state", p, p.Node("r"), 42)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The helper's digest changes with what it was started with, and not with where the file
// writes it.
func TestConfigDigest(t *testing.T) {
	base := "name: e\nnodes:\n  a:\n  r:\n    engines: 2\n    dispatch: round-robin\nlinks:\n  - endpoints: [a:eth1, r:eth1]\n"
	c := configOf(t, base)
	if len(c.Ifaces) != 1 || c.Ifaces[0].Name != "eth1" || len(c.Ifaces[0].FEPorts) != 2 || c.Control != 42 || len(c.Engines) != 2 {
		t.Fatalf("config %+v: want eth1 with 2 FE ports, control 42, 2 engines", c)
	}
	tests := []struct {
		name string
		doc  string
		same bool
	}{
		{"comment moves every line", "# a comment\n\n" + base, true},
		{"dispatch", "name: e\nnodes:\n  a:\n  r:\n    engines: 2\n    dispatch: flow\nlinks:\n  - endpoints: [a:eth1, r:eth1]\n", false},
		{"engines", "name: e\nnodes:\n  a:\n  r:\n    engines: 3\n    dispatch: round-robin\nlinks:\n  - endpoints: [a:eth1, r:eth1]\n", false},
		{"mtu", base + "    mtu: 9000\n", false},
	}
	for _, tc := range tests {
		if got := configOf(t, tc.doc).Digest() == c.Digest(); got != tc.same {
			t.Errorf("%s: same digest %v, want %v", tc.name, got, tc.same)
		}
	}
}

// A node whose kind's engines are VMs (VMEngines: the vm kind) gets a helper that starts
// engine VMs, with the node's loopback addresses as its own; a container's gets namespaces.
func TestConfigVMEngines(t *testing.T) {
	const doc = "name: e\nnodes:\n  a:\n  r:\n    kind: KIND\n    engines: 2\n    addresses: {lo: [10.9.9.9/32]}\nlinks:\n  - endpoints: [a:eth1, r:eth1]\n"
	for _, tc := range []struct {
		kind string
		vm   bool
		own  []string
	}{{"vm", true, []string{"10.9.9.9/32"}}, {"container", false, nil}} {
		c := configOf(t, strings.Replace(doc, "KIND", tc.kind, 1))
		if c.VM != tc.vm || !slices.Equal(c.Own, tc.own) {
			t.Errorf("kind %s: VM %v, own %v; want %v, %v", tc.kind, c.VM, c.Own, tc.vm, tc.own)
		}
	}
}
