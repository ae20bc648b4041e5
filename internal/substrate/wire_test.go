package substrate

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// netWire is netV1 with a link of a wire kind between a and c: one pair, no port.
var netWire = strings.Replace(strings.Replace(strings.Replace(netV1,
	"a: {kind: fakenode, addresses: {eth1: [10.0.0.1/24]}}", "a: {kind: fakenode, addresses: {eth1: [10.0.0.1/24], eth2: [10.0.3.1/24]}}", 1),
	"c: {kind: fakenode, addresses: {eth1: [10.0.1.3/24]}", "c: {kind: fakenode, addresses: {eth1: [10.0.1.3/24], eth2: [10.0.3.3/24]}", 1),
	"links:\n", "links:\n  - {name: ac, endpoints: [a:eth2, c:eth2], connector: fakewire}\n", 1)

// TestWire: a link of a wire kind (kinds.Wire) is made by the kind, with no port, its
// interfaces configured whole; a change of its addresses keeps the pair; a node started anew
// gets a new pair; and a failure at any operation, or a crash, is undone or finished.
func TestWire(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		newPair   bool // the change makes the pair anew
	}{
		{"addresses", strings.Replace(netWire, "eth2: [10.0.3.1/24]", "eth2: [10.0.3.11/24]", 1), false},
		{"mtu", strings.Replace(netWire, "connector: fakewire}", "connector: fakewire, mtu: 9000}", 1), false},
		{"a node started anew", strings.Replace(netWire, "echo hello", "echo bye", 1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := fresh(t, tc.doc)
			f := newFake()
			st := fakeStore(t)
			mustUp(t, f, st, netWire)
			rec := record(t, st)
			if got := named(f, rec.Plan); !strings.Contains(got, "wire ac [ID/a/eth2 ID/c/eth2] mtu=1500") ||
				!strings.Contains(got, "addrs ID/c/eth2 [10.0.3.3/24]") || strings.Count(got, "dev ") != 6 {
				t.Fatalf("after up the machine has\n%s\nwant the pair of ac configured, and no port for it", got)
			}
			key := rec.NetID + "/a/eth2"
			f.addrs[key] = append(f.addrs[key], "10.9.9.9/32") // the node's software's
			mustUp(t, f, st, tc.doc)
			if own := slices.Contains(f.addrs[key], "10.9.9.9/32"); own == tc.newPair {
				t.Errorf("a/eth2 has %v: want the node's own address kept with the pair (new pair: %v)", f.addrs[key], tc.newPair)
			}
			f.addrs[key] = slices.DeleteFunc(f.addrs[key], func(a string) bool { return a == "10.9.9.9/32" })
			if got := named(f, record(t, st).Plan); got != want {
				t.Errorf("after the change the machine has\n%s\nwant as made from the file:\n%s", got, want)
			}
			for i, n := 1, countOps(t, netWire, tc.doc); i <= n; i++ {
				f := newFake()
				st := fakeStore(t)
				mustUp(t, f, st, netWire)
				before := named(f, record(t, st).Plan)
				if _, err := upFake(t, f, st, tc.doc, i, false); !errors.Is(err, errFakeFail) {
					t.Fatalf("failing operation %d of %d: %v, want the failure", i, n, err)
				}
				if got := named(f, record(t, st).Plan); got != before {
					t.Errorf("failing operation %d of %d (%s): the machine has\n%s\nwant as before:\n%s", i, n, f.ops[i-1], got, before)
				}
			}
		})
	}
	// A crash at any operation of creating it: the next up finishes.
	want := fresh(t, netWire)
	for i, n := 1, countOps(t, "", netWire); i <= n; i++ {
		f := newFake()
		st := fakeStore(t)
		if _, err := upFake(t, f, st, netWire, i, true); err == nil {
			t.Fatalf("dying at operation %d of %d: no error", i, n)
		}
		mustUp(t, f, st, netWire)
		if got := named(f, record(t, st).Plan); got != want {
			t.Errorf("dying at operation %d of %d, then up: the machine has\n%s\nwant as made from the file:\n%s", i, n, got, want)
		}
	}
}
