package substrate

import (
	"slices"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
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
