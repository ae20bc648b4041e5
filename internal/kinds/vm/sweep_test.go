package vm

import (
	"path/filepath"
	"testing"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/vishvananda/netlink"
)

// TestSweepListsDevicesOnlyForWires checks that Sweep lists the machine's devices only when
// the network's plan, or a plan its record holds, has a VM node with interconnect devices: the
// listing takes as long as the machine has devices, and every up of every network sweeps.
func TestSweepListsDevicesOnlyForWires(t *testing.T) {
	container := &plan.Node{Node: &spec.Node{Name: "c", Kind: "container"}}
	tap := &plan.Node{Node: &spec.Node{Name: "t", Kind: Name}}
	tapSet := &plan.Node{Node: &spec.Node{Name: "t", Kind: Name, Settings: spec.NewKindSettings(&Settings{Interconnect: InterconnectTap})}}
	bridged := &plan.Node{Node: &spec.Node{Name: "b", Kind: Name, Settings: spec.NewKindSettings(&Settings{Interconnect: InterconnectBridge})}}
	macvtap := &plan.Node{Node: &spec.Node{Name: "m", Kind: Name, Settings: spec.NewKindSettings(&Settings{Interconnect: InterconnectMacvtap})}}
	nodes := func(ns ...*plan.Node) *plan.Plan { return &plan.Plan{NetID: "n1", Nodes: ns} }
	for _, c := range []struct {
		name     string
		plan     *plan.Plan
		recorded []*plan.Plan
		list     bool
	}{
		{"containers only", nodes(container, container), nil, false},
		{"containers, recorded too", nodes(container), []*plan.Plan{nodes(container), nil}, false},
		{"VMs on taps", nodes(container, tap, tapSet), []*plan.Plan{nodes(tap)}, false},
		{"a bridged VM", nodes(container, bridged), nil, true},
		{"a macvtap VM", nodes(macvtap), nil, true},
		{"a bridged VM in the last applied plan", nodes(container), []*plan.Plan{nodes(bridged)}, true},
		{"a macvtap VM in an interrupted change's target", nodes(tap), []*plan.Plan{nodes(tap), nodes(macvtap)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			listed := 0
			saved := listDevices
			listDevices = func() ([]netlink.Link, error) { listed++; return nil, nil }
			defer func() { listDevices = saved }()
			env := &kinds.Env{Store: &state.Store{Dir: filepath.Join(t.TempDir(), "state"), ID: "s"}, Plan: c.plan, Recorded: c.recorded}
			if err := (Kind{}).Sweep(env, nil); err != nil {
				t.Fatal(err)
			}
			if got := listed > 0; got != c.list {
				t.Errorf("devices listed %d times, want listed: %v", listed, c.list)
			}
		})
	}
}
