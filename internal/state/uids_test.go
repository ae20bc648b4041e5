package state

import (
	"errors"
	"testing"
)

func TestAllocUIDs(t *testing.T) {
	t.Setenv("TRELLIS_UID_BASE", "131072")
	t.Setenv("TRELLIS_UID_RANGES", "3")
	t.Setenv("TRELLIS_UID_REGISTRY", t.TempDir()) // not the machine's
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	busy := map[uint32]bool{131072 + UIDRangeSize: true} // a range seen in use on the machine
	inUse := func() (map[uint32]bool, error) {
		out := map[uint32]bool{}
		for k := range busy {
			out[k] = true
		}
		return out, nil
	}
	steps := []struct {
		op, name string
		want     uint32
		err      error
	}{
		{"alloc", "a", 131072, nil},
		{"alloc", "a", 131072, nil}, // its own range again
		{"alloc", "b", 131072 + 2*UIDRangeSize, nil},
		{"alloc", "c", 0, ErrNoUIDs},
		{"delete", "a", 0, nil},
		{"alloc", "c", 131072, nil}, // a's range, freed by Delete
	}
	for i, s := range steps {
		if s.op == "delete" {
			if err := st.Delete(s.name); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := st.AllocUIDs(s.name, inUse)
		if !errors.Is(err, s.err) || got != s.want {
			t.Errorf("step %d: AllocUIDs(%s) = %d, %v; want %d, %v", i, s.name, got, err, s.want, s.err)
		}
	}
}

func TestUIDConfig(t *testing.T) {
	cases := []struct {
		base, ranges string
		ok           bool
	}{
		{"", "", true},
		{"65536", "1", true},
		{"1000", "1", false},       // not a multiple of the range size
		{"0", "1", false},          // uid 0 is host root
		{"65536", "0", false},      // no ranges
		{"65536", "65536", false},  // beyond 2^32
		{"x", "1", false},          // not a number
		{"4294901760", "1", false}, // its last uid would be 2^32-1
	}
	for _, c := range cases {
		t.Setenv("TRELLIS_UID_BASE", c.base)
		t.Setenv("TRELLIS_UID_RANGES", c.ranges)
		_, _, err := uidConfig()
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrUIDConfig)) {
			t.Errorf("base %q ranges %q: err %v, want ok=%v", c.base, c.ranges, err, c.ok)
		}
	}
}
