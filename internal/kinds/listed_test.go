package kinds

import (
	"maps"
	"slices"
	"testing"
)

// A kind with a shared listing sweeps the listing's control groups of its own prefix (none
// when the listing has none: not every group of the machine); without one, it lists them.
func TestGroups(t *testing.T) {
	listed := &Listed{Groups: []string{"s1.n00001.a", "vm.s1.n00001.b", "s1.n00001.c"}}
	tests := []struct {
		name   string
		env    *Env
		prefix string
		want   []string
		ok     bool
	}{
		{"container", &Env{Listed: listed}, "s1.n00001.", []string{"s1.n00001.a", "s1.n00001.c"}, true},
		{"vm", &Env{Listed: listed}, "vm.s1.n00001.", []string{"vm.s1.n00001.b"}, true},
		{"none of the kind", &Env{Listed: &Listed{}}, "s1.n00001.", []string{}, true},
		{"no listing", &Env{}, "s1.n00001.", nil, false},
	}
	for _, tt := range tests {
		got, ok := Groups(tt.env, tt.prefix)
		if ok != tt.ok || !slices.Equal(got, tt.want) || (tt.ok && got == nil) {
			t.Errorf("%s: %v %v, want %v %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// A creation with a shared listing takes the uid ranges in use from it, without one scans.
func TestUIDBases(t *testing.T) {
	scanned := map[uint32]bool{1 << 30: true}
	listedBases := map[uint32]bool{2 << 30: true}
	scan := func() (map[uint32]bool, error) { return scanned, nil }
	tests := []struct {
		name string
		env  *Env
		want map[uint32]bool
	}{
		{"listing", &Env{Listed: &Listed{UIDBases: func() (map[uint32]bool, error) { return listedBases, nil }}}, listedBases},
		{"listing without uids", &Env{Listed: &Listed{}}, scanned},
		{"no listing", &Env{}, scanned},
	}
	for _, tt := range tests {
		got, err := UIDBases(tt.env, scan)()
		if err != nil || !maps.Equal(got, tt.want) {
			t.Errorf("%s: %v %v, want %v", tt.name, got, err, tt.want)
		}
	}
}

// Without a listing a kind looks at every process (nil), with one at its processes only, an
// empty list included.
func TestProcesses(t *testing.T) {
	var none *Listed
	if got := none.Processes(); got != nil {
		t.Errorf("no listing: %v, want nil", got)
	}
	if got := (&Listed{PIDs: []int{}}).Processes(); got == nil || len(got) != 0 {
		t.Errorf("an empty listing: %v, want an empty list", got)
	}
	if got := (&Listed{PIDs: []int{3, 4}}).Processes(); !slices.Equal(got, []int{3, 4}) {
		t.Errorf("a listing: %v", got)
	}
}
