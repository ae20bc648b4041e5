package vm

import (
	"slices"
	"testing"

	"github.com/trellisnet/trellis/internal/enginehelper"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// Engine VMs are found by their names NODE@feI and grouped under their node; a node with an
// engine VM missing counts as running in part.
func TestEngineVMs(t *testing.T) {
	p := &plan.Plan{Nodes: []*plan.Node{
		{Node: &spec.Node{Name: "r", Kind: Name, Engines: []spec.Engine{{}, {}}}},
		{Node: &spec.Node{Name: "s", Kind: Name, Engines: []spec.Engine{{}}}},
	}}
	found := map[string][]kinds.Instance{
		"r":                {{PID: 10}},
		feName("r", 0):     {{PID: 11}},
		feName("r", 1):     {{PID: 12}},
		"s":                {{PID: 20}},
		feName("gone", 0):  {{PID: 30}}, // a node the plan no longer has
		feName("r", 7):     {{PID: 40}}, // an engine the node no longer has
		"r@fe1x":           {{PID: 50}},
		feName("s", 0)[:1]: {{PID: 60}},
	}
	got := engineVMs(found, p)
	if want := []int{11, 12}; !slices.Equal(got["r"], want) {
		t.Errorf("engine VMs of r: %v, want %v", got["r"], want)
	}
	if got["s"] != nil {
		t.Errorf("engine VMs of s: %v, want none", got["s"])
	}
	if _, ok := got["gone"]; ok {
		t.Errorf("engine VMs of a node not in the plan: %v", got["gone"])
	}
	cases := []struct {
		pids []int
		want int
		miss bool
	}{
		{[]int{11, 12}, 2, false},
		{[]int{11, 0}, 2, true},
		{nil, 1, true},
		{[]int{11}, 2, true},
		{nil, 0, false},
	}
	for _, c := range cases {
		if got := enginesMissing(c.pids, c.want); got != c.miss {
			t.Errorf("enginesMissing(%v, %d) = %v, want %v", c.pids, c.want, got, c.miss)
		}
	}
	if node, ok := EngineOf(EngineName("r", 3)); !ok || node != "r" {
		t.Errorf("EngineOf(EngineName(r, 3)) = %q, %v", node, ok)
	}
	if _, ok := EngineOf("r"); ok {
		t.Errorf("EngineOf(r): a node's own VM taken for an engine VM")
	}
}

// Engine VMs whose node's own QEMU is gone stand for their node, running in part.
func TestOrphanEngines(t *testing.T) {
	found := map[string][]kinds.Instance{
		"r":            {{PID: 10}},
		feName("r", 0): {{PID: 11}},
		feName("s", 0): {{PID: 21}},
		feName("s", 1): {{PID: 22}},
	}
	got := orphanEngines(found)
	want := map[string]kinds.Instance{"s": {Kind: Name, Name: "s", PID: 21, Digest: kinds.PartGone}}
	if len(got) != len(want) || got["s"] != want["s"] {
		t.Errorf("orphanEngines = %+v, want %+v", got, want)
	}
}

// The engines helper finds an engine VM's mirror port by the name this kind gives its QEMU.
func TestEngineVMNames(t *testing.T) {
	if got, want := enginehelper.EngineVM("r", 3), feName("r", 3); got != want {
		t.Errorf("engines.EngineVM = %q, want the kind's %q", got, want)
	}
}
