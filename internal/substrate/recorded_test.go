package substrate

import (
	"slices"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
)

// TestRecorded checks the plans a sweep is told the record holds besides the one applied.
func TestRecorded(t *testing.T) {
	a, b, c := &plan.Plan{NetID: "a"}, &plan.Plan{NetID: "b"}, &plan.Plan{NetID: "c"}
	for _, tc := range []struct {
		name string
		rec  *state.Record
		p    *plan.Plan
		want []*plan.Plan
	}{
		{"no record", nil, a, nil},
		{"created: the record's plan is the one applied", &state.Record{Plan: a}, a, nil},
		{"a change", &state.Record{Plan: a, Target: b}, b, []*plan.Plan{a}},
		{"a settings-only change", &state.Record{Plan: a}, b, []*plan.Plan{a}},
		{"a rollback", &state.Record{Plan: a, Target: b}, a, []*plan.Plan{b}},
		{"an interrupted change, converged elsewhere", &state.Record{Plan: a, Target: b}, c, []*plan.Plan{a, b}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := recorded(tc.rec, tc.p); !slices.Equal(got, tc.want) {
				t.Errorf("recorded = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestEnginesMayRun checks when the reconciler looks for engine helpers, which reads every
// process's command line: when a plan of the network has engines, or nothing is recorded.
func TestEnginesMayRun(t *testing.T) {
	plain := &plan.Plan{Nodes: []*plan.Node{{Node: &spec.Node{Name: "a"}}}}
	withEngines := &plan.Plan{Nodes: []*plan.Node{{Node: &spec.Node{Name: "a", Engines: []spec.Engine{{Weight: 1}}}}}}
	hosting := &plan.Plan{Hosted: []*plan.Hosted{{Node: "b", Engines: []spec.Engine{{Weight: 1}}, Here: []int{0}}}}
	for _, tc := range []struct {
		name     string
		p        *plan.Plan
		recorded []*plan.Plan
		want     bool
	}{
		{"new to the machine: a helper may be left over", plain, nil, true},
		{"no engines in any plan", plain, []*plan.Plan{plain, nil}, false},
		{"engines wanted", withEngines, []*plan.Plan{plain}, true},
		{"engines in the last applied plan: their helpers stop", plain, []*plan.Plan{withEngines}, true},
		{"engines in an interrupted change's target", plain, []*plan.Plan{plain, withEngines}, true},
		{"another machine's engines held here", hosting, []*plan.Plan{plain}, true},
		{"another machine's engines held here before", plain, []*plan.Plan{hosting}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := enginesMayRun(tc.p, tc.recorded); got != tc.want {
				t.Errorf("enginesMayRun = %v, want %v", got, tc.want)
			}
		})
	}
}
