package placement

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

func TestPlaceNetwork(t *testing.T) {
	two := []Machine{{Name: "m1", Cores: 4, Memory: 1000, NIC: 100}, {Name: "m2", Cores: 4, Memory: 1000, NIC: 100}}
	tests := []struct {
		name     string
		machines []Machine
		nodes    []NetNode
		links    []NetLink
		want     map[string]string
		wantErr  error
		errText  string
	}{{
		name:     "chain fits one machine",
		machines: two,
		nodes:    []NetNode{{Name: "a", CPU: 1}, {Name: "b", CPU: 1}, {Name: "c", CPU: 1}},
		links:    []NetLink{{"a", "b", 50}, {"b", "c", 50}},
		want:     map[string]string{"a": "m1", "b": "m1", "c": "m1"},
	}, {
		name:     "pinned node pulls its neighbour",
		machines: two,
		nodes:    []NetNode{{Name: "a", CPU: 1, Machine: "m2"}, {Name: "b", CPU: 1}},
		links:    []NetLink{{"a", "b", 50}},
		want:     map[string]string{"a": "m2", "b": "m2"},
	}, {
		name:     "pinned by the machine",
		machines: []Machine{{Name: "m1", Cores: 4}, {Name: "m2", Cores: 4, Pinned: []string{"b"}}},
		nodes:    []NetNode{{Name: "a", CPU: 1}, {Name: "b", CPU: 1}},
		want:     map[string]string{"a": "m1", "b": "m2"},
	}, {
		// Greedy puts b and c together and a, d on the other machine (cross 180); the local
		// search swaps a and c (cross 10).
		name:     "split at the lightest link",
		machines: []Machine{{Name: "m1", Cores: 4, NIC: 1000}, {Name: "m2", Cores: 4, NIC: 1000}},
		nodes:    []NetNode{{Name: "a", CPU: 2}, {Name: "b", CPU: 2}, {Name: "c", CPU: 2}, {Name: "d", CPU: 2}},
		links:    []NetLink{{"a", "b", 90}, {"b", "c", 10}, {"c", "d", 90}},
		want:     map[string]string{"a": "m1", "b": "m1", "c": "m2", "d": "m2"},
	}, {
		name:     "memory short on the pinned machine",
		machines: two,
		nodes:    []NetNode{{Name: "a", Memory: 1500, Machine: "m1"}},
		wantErr:  ErrNoCapacity, errText: "node a: not enough capacity: machine m1: memory: need 1500, free 1000",
	}, {
		name:     "cores short everywhere",
		machines: two,
		nodes:    []NetNode{{Name: "a", CPU: 5}},
		wantErr:  ErrNoCapacity, errText: "cpu: need 5, free 4",
	}, {
		name:     "nic short",
		machines: []Machine{{Name: "m1", Cores: 1, NIC: 10}, {Name: "m2", Cores: 1, NIC: 10}},
		nodes:    []NetNode{{Name: "a", CPU: 1}, {Name: "b", CPU: 1}},
		links:    []NetLink{{"a", "b", 20}},
		wantErr:  ErrNoCapacity, errText: "nic: need 20, free 10",
	}, {
		name:     "unknown machine",
		machines: two,
		nodes:    []NetNode{{Name: "a", Machine: "m9"}},
		wantErr:  ErrInvalid, errText: `no machine named "m9"`,
	}, {
		name:     "unknown link end",
		machines: two,
		nodes:    []NetNode{{Name: "a"}},
		links:    []NetLink{{"a", "z", 1}},
		wantErr:  ErrInvalid, errText: "a-z: no such node",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PlaceNetwork(tt.machines, tt.nodes, tt.links)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.errText) {
					t.Fatalf("err %v, want %v containing %q", err, tt.wantErr, tt.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSliceAlloc(t *testing.T) {
	tests := []struct {
		name     string
		free     []float64
		need     float64
		want     []Slice
		wantFree []float64
		wantErr  bool
	}{
		{"remainder only, best fit", []float64{1, 0.5, 0.3}, 0.25, []Slice{{2, 0.25}}, []float64{1, 0.5, 0.05}, false},
		{"exact fit wins", []float64{1, 0.4, 0.6}, 0.4, []Slice{{1, 0.4}}, []float64{1, 0, 0.6}, false},
		{"whole engines then remainder", []float64{1, 1, 1, 0.5}, 2.3, []Slice{{0, 1}, {1, 1}, {3, 0.3}}, []float64{0, 0, 1, 0.2}, false},
		{"remainder on an idle engine", []float64{1, 1}, 1.5, []Slice{{0, 1}, {1, 0.5}}, []float64{0, 0.5}, false},
		{"exact multiple", []float64{1, 1, 0.2}, 2, []Slice{{0, 1}, {1, 1}}, []float64{0, 0, 0.2}, false},
		{"too few idle engines", []float64{1, 0.9}, 2, nil, []float64{1, 0.9}, true},
		{"remainder fits nowhere", []float64{0.2, 0.1}, 0.5, nil, []float64{0.2, 0.1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SliceAlloc(tt.free, 1, tt.need)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("slices %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i].Engine != tt.want[i].Engine || !near(got[i].Power, tt.want[i].Power) {
					t.Fatalf("slices %v, want %v", got, tt.want)
				}
			}
			for i := range tt.free {
				if !near(tt.free[i], tt.wantFree[i]) {
					t.Fatalf("free %v, want %v", tt.free, tt.wantFree)
				}
			}
		})
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
