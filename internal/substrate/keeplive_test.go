package substrate

import (
	"reflect"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
)

// TestKeepLive checks which state of a recorded plan a new plan of the same file takes.
func TestKeepLive(t *testing.T) {
	loss := spec.Impairment{Loss: 5}
	ports := func(ps ...plan.Port) []plan.Port { return ps }
	a, b := plan.Port{Node: "a", Ifname: "eth1", Name: "pa"}, plan.Port{Node: "b", Ifname: "eth1", Name: "pb"}
	down := func(p plan.Port) plan.Port { p.Down = true; return p }
	lossy := func(p plan.Port) plan.Port { p.Impair = loss; return p }
	for _, tc := range []struct {
		name      string
		was, file []*plan.Link // the recorded plan's links; the file's plan's links
		want      []*plan.Link
	}{
		{"the whole link down",
			[]*plan.Link{{Name: "ab", Down: true, Ports: ports(a, b)}},
			[]*plan.Link{{Name: "ab", Rate: 1000, Ports: ports(a, b)}},
			[]*plan.Link{{Name: "ab", Rate: 1000, Down: true, Ports: ports(a, b)}}},
		{"one endpoint down and impaired, the other as the file",
			[]*plan.Link{{Name: "ab", Ports: ports(down(a), lossy(b))}},
			[]*plan.Link{{Name: "ab", Ports: ports(a, b)}},
			[]*plan.Link{{Name: "ab", Ports: ports(down(a), lossy(b))}}},
		{"set back up live: the file's down is not applied again",
			[]*plan.Link{{Name: "ab", Ports: ports(a, b)}},
			[]*plan.Link{{Name: "ab", Down: true, Ports: ports(a, lossy(b))}},
			[]*plan.Link{{Name: "ab", Ports: ports(a, b)}}},
		{"a link or endpoint the record has not gets the file's",
			[]*plan.Link{{Name: "ab", Down: true, Ports: ports(down(a))}},
			[]*plan.Link{{Name: "ab", Ports: ports(a, down(b))}, {Name: "cd", Down: true}},
			[]*plan.Link{{Name: "ab", Down: true, Ports: ports(down(a), down(b))}, {Name: "cd", Down: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &plan.Plan{Links: tc.file}
			keepLive(p, &plan.Plan{Links: tc.was})
			if !reflect.DeepEqual(p.Links, tc.want) {
				t.Errorf("links %+v, want %+v", p.Links, tc.want)
			}
		})
	}
	keepLive(&plan.Plan{}, nil) // no record of a plan: nothing to keep
}

// TestLiveOf checks which recorded plan holds the live state: a change under way's target
// (recorded with the change's file), else the plan last applied.
func TestLiveOf(t *testing.T) {
	applied, target := &plan.Plan{NetID: "applied"}, &plan.Plan{NetID: "target"}
	if got := liveOf(&state.Record{Plan: applied}); got != applied {
		t.Errorf("up: %v, want the applied plan", got)
	}
	if got := liveOf(&state.Record{Plan: applied, Target: target}); got != target {
		t.Errorf("a change under way: %v, want its target", got)
	}
}
