package placer

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/cluster"
	_ "github.com/trellisnet/trellis/internal/kinds/all" // the kinds the files name
	"github.com/trellisnet/trellis/internal/spec"
)

func machines(n int, cores float64, memory uint64) []*cluster.Machine {
	var out []*cluster.Machine
	for i := range n {
		out = append(out, &cluster.Machine{Name: "m" + string(rune('1'+i)), Address: netip.AddrFrom4([4]byte{198, 18, 0, byte(i + 1)}), MTU: 1500, Cores: cores, Memory: memory})
	}
	return out
}

func parseNet(t *testing.T, src string) *spec.Network {
	t.Helper()
	n, err := spec.ParseCluster("/t/net.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCompute(t *testing.T) {
	plain := "name: c\nnodes:\n  a: {}\n  b: {}\n  c: {}\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n  - endpoints: [b:eth2, c:eth1]\n"
	needs := "name: c\nnodes:\n  a: {cpu: 2}\n  b: {cpu: 2}\n  c: {cpu: 2, memory: 1G}\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n  - endpoints: [b:eth2, c:eth1]\n"
	pinned := "name: c\nnodes:\n  a: {host: m3}\n  b: {}\n  c: {}\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n  - endpoints: [b:eth2, c:eth1]\n"
	pinnedAway := "name: c\nnodes:\n  a: {host: m9}\n  b: {}\n  c: {}\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n  - endpoints: [b:eth2, c:eth1]\n"
	prev := &cluster.Placement{Nodes: map[string]string{"a": "m1", "b": "m2", "c": "m3"},
		Machines: map[string]cluster.Underlay{"m9": {Address: netip.MustParseAddr("198.18.0.9"), MTU: 1500}}}
	prevAway := &cluster.Placement{Nodes: map[string]string{"a": "m9", "b": "m2", "c": "m3"}, Machines: prev.Machines}
	for _, tc := range []struct {
		name     string
		src      string
		machines []*cluster.Machine
		prev     *cluster.Placement
		load     Load
		want     map[string]string // nil: check only that every machine has at most 2 cores of nodes
		err      string
	}{
		{"spread over three", plain, machines(3, 4, 8<<30), nil, nil, map[string]string{"a": "m1", "b": "m2", "c": "m3"}, ""},
		{"spread counts others' nodes", plain, machines(3, 4, 8<<30), nil, Load{"m1": {Nodes: 2}}, map[string]string{"a": "m2", "b": "m3", "c": "m2"}, ""},
		{"placed nodes stay, lost ones move", plain, machines(2, 4, 8<<30), prev, nil, map[string]string{"a": "m1", "b": "m2", "c": "m1"}, ""},
		{"pin", pinned, machines(3, 4, 8<<30), nil, nil, map[string]string{"a": "m3", "b": "m1", "c": "m2"}, ""},
		{"pin to an unregistered machine", pinnedAway, machines(3, 4, 8<<30), nil, nil, nil, `node a: host "m9" is not a registered machine (registered: m1, m2, m3)`},
		{"pin to a lost machine stays", pinnedAway, machines(3, 4, 8<<30), prevAway, nil, map[string]string{"a": "m9", "b": "m2", "c": "m3"}, ""},
		{"capacity: 2 cores each", needs, machines(3, 2, 8<<30), nil, nil, nil, ""},
		{"capacity: load counts", needs, machines(3, 2, 8<<30), nil, Load{"m1": {CPU: 1}}, nil, "cpu"},
		{"capacity: memory short", needs, machines(3, 8, 512<<20), nil, nil, nil, "memory"},
		{"no machines", plain, nil, nil, nil, nil, "no machine is registered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := parseNet(t, tc.src)
			got, under, err := Compute(n, tc.machines, tc.prev, tc.load)
			if tc.err != "" {
				if !errors.Is(err, ErrNoFit) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Compute: %v, want ErrNoFit saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil && !equal(got, tc.want) {
				t.Errorf("placed %v, want %v", got, tc.want)
			}
			if len(got) != len(n.Nodes) {
				t.Errorf("placed %d nodes of %d", len(got), len(n.Nodes))
			}
			cores := map[string]float64{}
			for _, nd := range n.Nodes {
				cores[got[nd.Name]] += nd.Needs.CPU
				if _, ok := under[got[nd.Name]]; !ok {
					t.Errorf("node %s on %s, which the placement gives no underlay", nd.Name, got[nd.Name])
				}
			}
			for m, c := range cores {
				if c > 2 && tc.src == needs {
					t.Errorf("machine %s holds %v cores of nodes, more than its 2", m, c)
				}
			}
		})
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestLoadOf(t *testing.T) {
	n := parseNet(t, "name: c\nnodes:\n  a: {cpu: 1, memory: 16M}\n  b: {cpu: 0.5}\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n    rate: 10mbit\n")
	load := Load{}
	LoadOf(n, &cluster.Placement{Nodes: map[string]string{"a": "m1", "b": "m2"}}, load)
	if u := load["m1"]; u == nil || u.Nodes != 1 || u.CPU != 1 || u.Memory != 16<<20 || u.Rate != 10e6 {
		t.Errorf("m1: %+v", u)
	}
	if u := load["m2"]; u == nil || u.Nodes != 1 || u.CPU != 0.5 || u.Rate != 10e6 {
		t.Errorf("m2: %+v", u)
	}
}
