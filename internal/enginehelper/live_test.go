package enginehelper

import (
	"testing"

	"github.com/trellisnet/trellis/internal/spec"
)

func TestTableLive(t *testing.T) {
	three := []spec.Engine{{Weight: 1}, {Weight: 2}, {Weight: 1}}
	tests := []struct {
		name  string
		mode  string
		live  []bool
		want  map[uint32]int // FE -> slots it has, at least 1 when present
		slots int
	}{
		{"all up round-robin", spec.DispatchRoundRobin, []bool{true, true, true}, map[uint32]int{0: 1, 1: 1, 2: 1}, 3},
		{"middle down round-robin", spec.DispatchRoundRobin, []bool{true, false, true}, map[uint32]int{0: 1, 2: 1}, 2},
		{"weighted keeps weights", spec.DispatchWeighted, []bool{false, true, true}, map[uint32]int{1: 2, 2: 1}, 3},
		{"flow over the two up", spec.DispatchFlow, []bool{true, true, false}, nil, MaglevSize},
		{"none up", spec.DispatchFlow, []bool{false, false, false}, map[uint32]int{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := TableLive(spec.Dispatch{Mode: tt.mode}, three, tt.live)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Slots) != tt.slots || c.FEs != 3 {
				t.Fatalf("%d slots over %d FEs, want %d over 3", len(c.Slots), c.FEs, tt.slots)
			}
			got := map[uint32]int{}
			for _, s := range c.Slots {
				if !tt.live[s] {
					t.Fatalf("slot to FE %d, which is down", s)
				}
				got[s]++
			}
			if tt.want == nil {
				for i, up := range tt.live {
					if up && got[uint32(i)] < MaglevSize/3 {
						t.Fatalf("FE %d has %d of %d slots", i, got[uint32(i)], MaglevSize)
					}
				}
				return
			}
			for fe, n := range tt.want {
				if got[fe] != n {
					t.Fatalf("FE %d has %d slots, want %d (all: %v)", fe, got[fe], n, got)
				}
			}
		})
	}
}
