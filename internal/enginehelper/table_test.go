package enginehelper

import (
	"reflect"
	"testing"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/spec"
)

func TestSmoothWeighted(t *testing.T) {
	tests := []struct {
		weights []int
		want    []uint32
	}{
		{[]int{1, 1, 1}, []uint32{0, 1, 2}},
		{[]int{2, 2}, []uint32{0, 1}}, // reduced by the gcd
		{[]int{3, 1}, []uint32{0, 0, 1, 0}},
		{[]int{5, 1, 1}, []uint32{0, 0, 1, 0, 2, 0, 0}},
	}
	for _, tc := range tests {
		if got := SmoothWeighted(append([]int{}, tc.weights...)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SmoothWeighted(%v) = %v, want %v", tc.weights, got, tc.want)
		}
	}
}

// Each engine gets an even share of a Maglev table, and adding or removing the last engine
// moves little more than the share that must move.
func TestMaglevBalanceAndDisruption(t *testing.T) {
	for n := 1; n <= 8; n++ {
		table := Maglev(n, MaglevSize)
		count := make([]int, n)
		for _, b := range table {
			count[b]++
		}
		for i, c := range count {
			if share := float64(c) * float64(n) / MaglevSize; share < 0.97 || share > 1.03 {
				t.Errorf("n=%d: engine %d has %d slots (%.3f of an even share)", n, i, c, share)
			}
		}
		if n == 1 {
			continue
		}
		prev := Maglev(n-1, MaglevSize)
		moved := 0
		for i := range table {
			if table[i] != prev[i] && int(table[i]) != n-1 {
				moved++ // a slot moved between engines that are in both tables
			}
		}
		if frac := float64(moved) / MaglevSize; frac > 0.05 {
			t.Errorf("n=%d: %.3f of the slots moved between the first %d engines; want under 0.05", n, frac, n-1)
		}
	}
}

func TestTable(t *testing.T) {
	three := []spec.Engine{{Weight: 1}, {Weight: 1}, {Weight: 2}}
	tests := []struct {
		name   string
		d      spec.Dispatch
		mode   uint32
		slots  int
		fields uint32
	}{
		{"round-robin", spec.Dispatch{Mode: spec.DispatchRoundRobin}, dataplane.EngineModeCounter, 3, 0},
		{"weighted", spec.Dispatch{Mode: spec.DispatchWeighted}, dataplane.EngineModeCounter, 4, 0},
		{"flow", spec.Dispatch{Mode: spec.DispatchFlow, Fields: []string{"src", "dport"}}, dataplane.EngineModeFlow, MaglevSize,
			dataplane.EngineFieldSrc | dataplane.EngineFieldDport},
	}
	for _, tc := range tests {
		c, err := Table(tc.d, three)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.Mode != tc.mode || len(c.Slots) != tc.slots || c.Fields != tc.fields || c.FEs != 3 {
			t.Errorf("%s: mode %d, %d slots, fields %#x, %d FEs; want %d, %d, %#x, 3", tc.name, c.Mode, len(c.Slots), c.Fields, c.FEs, tc.mode, tc.slots, tc.fields)
		}
	}
	if _, err := Table(spec.Dispatch{Mode: "random"}, three); err == nil {
		t.Error("Table accepted an unknown mode")
	}
	if _, err := Table(spec.Dispatch{Mode: spec.DispatchFlow}, nil); err == nil {
		t.Error("Table accepted no engines")
	}
}

func TestCPUMask(t *testing.T) {
	tests := []struct {
		cpus []int
		want string
	}{
		{[]int{0}, "00000001"},
		{[]int{0, 1, 3}, "0000000b"},
		{[]int{33}, "00000002,00000000"},
	}
	for _, tc := range tests {
		if got := CPUMask(tc.cpus); got != tc.want {
			t.Errorf("CPUMask(%v) = %q, want %q", tc.cpus, got, tc.want)
		}
	}
}
