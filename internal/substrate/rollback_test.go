package substrate

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
)

// The reconciler's unit tests of failures: rollback, a crash, pruning (reconcile_test.go).

// foreign puts on the fake what trellis did not make for network net: another network's node
// and port, and a device of the machine's own. Nothing may touch them.
func foreign(f *fakeMachine) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes["other1/x"] = &fakeProc{pid: 9999, digest: "d", execs: 1}
	f.kept["other1/x"] = true
	f.add("trother1p0", &fakeDev{mtu: 1500, up: true, node: "other1/x", ifname: "eth1"})
	f.add("eth0", &fakeDev{mtu: 1500, up: true})
	f.helpers["other1"] = true
}

const foreignState = `dev eth0 mtu=1500 up=true rate=0 impair={Loss:0 LossCorrelation:0 Duplicate:0 Corrupt:0} node= master=
dev trother1p0 mtu=1500 up=true rate=0 impair={Loss:0 LossCorrelation:0 Duplicate:0 Corrupt:0} node=other1/x master=
helpers other1
kept other1/x
node other1/x digest=d execs=1`

// withForeign is state s with foreignState's lines, sorted as state sorts them.
func withForeign(s string) string {
	lines := strings.Split(foreignState, "\n")
	if s != "" {
		lines = append(lines, strings.Split(s, "\n")...)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// countOps is how many operations up of doc does on a machine that has the network of prev
// up ("": none).
func countOps(t *testing.T, prev, doc string) int {
	t.Helper()
	f := newFake()
	st := fakeStore(t)
	if prev != "" {
		mustUp(t, f, st, prev)
	}
	_, ops := mustUp(t, f, st, doc)
	return len(ops)
}

// TestCreateRollback: an up that fails at any operation of creating a network removes what
// it made, and the record; what trellis did not make stays.
func TestCreateRollback(t *testing.T) {
	n := countOps(t, "", netV1)
	for i := 1; i <= n; i++ {
		f := newFake()
		foreign(f)
		st := fakeStore(t)
		_, err := upFake(t, f, st, netV1, i, false)
		if !errors.Is(err, errFakeFail) {
			t.Fatalf("failing operation %d of %d: up returned %v, want the failure", i, n, err)
		}
		if s := f.state(); s != foreignState {
			t.Errorf("failing operation %d of %d (%s): the machine has\n%s\nwant only what trellis did not make:\n%s", i, n, f.ops[i-1], s, foreignState)
		}
		if rec, err := st.Load("net"); rec != nil || err != nil {
			t.Errorf("failing operation %d of %d: the record is %v, %v; want none", i, n, rec, err)
		}
	}
}

// TestChangeRollback: a live change that fails at any of its operations takes the network back
// to what it was: the machine as the old file makes it, the record's plan the old one.
func TestChangeRollback(t *testing.T) {
	for _, tc := range []struct{ name, doc string }{
		{"rate", edit(t, "rate: 10mbit", "rate: 20mbit")},
		{"addresses and loss", edit(t, "[10.0.0.1/24]", "[10.0.0.11/24]", "connector: fakebridge}", "connector: fakebridge, loss: 5%}")},
		{"node settings and mtu", edit(t, "echo hello", "echo bye", "rate: 10mbit}", "rate: 10mbit, mtu: 9000}")},
		{"node and link added", strings.Replace(netV1, "links:\n", "  d: {kind: fakenode, addresses: {eth1: [10.0.2.4/24]}}\nlinks:\n", 1) +
			"  - {name: cd, endpoints: [c:eth2, d:eth1], connector: fakebridge}\n"},
		{"link removed", strings.Replace(strings.Replace(strings.Replace(netV1, ", eth2: [10.0.1.2/24]", "", 1), "addresses: {eth1: [10.0.1.3/24]}, ", "", 1), "  - {name: bc, endpoints: [b:eth2, c:eth1], connector: fakebridge}\n", "", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := withForeign(fresh(t, netV1))
			n := countOps(t, netV1, tc.doc)
			for i := 1; i <= n; i++ {
				f := newFake()
				foreign(f)
				st := fakeStore(t)
				mustUp(t, f, st, netV1)
				was := record(t, st)
				_, err := upFake(t, f, st, tc.doc, i, false)
				if !errors.Is(err, errFakeFail) || !strings.Contains(err.Error(), "taken back") {
					t.Fatalf("failing operation %d of %d: up returned %v, want the failure, taken back", i, n, err)
				}
				rec := record(t, st)
				if got := named(f, rec.Plan); got != want {
					t.Errorf("failing operation %d of %d (%s): the machine has\n%s\nwant as before:\n%s", i, n, f.ops[i-1], got, want)
				}
				if rec.Status != state.Up || planJSON(t, rec.Plan) != planJSON(t, was.Plan) || rec.File != was.File || rec.Target != nil {
					t.Errorf("failing operation %d of %d: record %s, plan\n%s\nfile %s, target %v; want up, the plan as before:\n%s\n%s, none",
						i, n, rec.Status, planJSON(t, rec.Plan), rec.File, rec.Target != nil, planJSON(t, was.Plan), was.File)
				}
			}
		})
	}
}

// TestAdoptAfterCrash: when trellis dies at any operation of an up (creating, or changing a
// network), the next up adopts what it left and finishes: the machine as the file makes it,
// each node's start commands run once; or the next down removes everything it made.
func TestAdoptAfterCrash(t *testing.T) {
	v2 := edit(t, "echo hello", "echo bye", "rate: 10mbit", "rate: 20mbit", "[10.0.0.1/24]", "[10.0.0.11/24]")
	for _, tc := range []struct{ name, prev, doc string }{
		{"create", "", netV1},
		{"change", netV1, v2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := withForeign(fresh(t, tc.doc))
			n := countOps(t, tc.prev, tc.doc)
			for i := 1; i <= n; i++ {
				for _, then := range []string{"up", "down"} {
					f := newFake()
					foreign(f)
					st := fakeStore(t)
					if tc.prev != "" {
						mustUp(t, f, st, tc.prev)
					}
					if _, err := upFake(t, f, st, tc.doc, i, true); err == nil {
						t.Fatalf("dying at operation %d of %d: up returned no error", i, n)
					}
					died := f.ops[i-1]
					if then == "down" {
						if err := down(f.run(0, false), st, "net"); err != nil {
							t.Fatalf("dying at operation %d of %d (%s), then down: %v", i, n, died, err)
						}
						if s := f.state(); s != foreignState {
							t.Errorf("dying at operation %d of %d (%s), then down: the machine has\n%s\nwant only what trellis did not make:\n%s", i, n, died, s, foreignState)
						}
						continue
					}
					mustUp(t, f, st, tc.doc)
					rec := record(t, st)
					if got := named(f, rec.Plan); got != want {
						t.Errorf("dying at operation %d of %d (%s), then up: the machine has\n%s\nwant as made from the file:\n%s", i, n, died, got, want)
					}
					if rec.Status != state.Up || len(rec.Starting) > 0 || rec.Target != nil || planJSON(t, rec.Plan) != filePlan(t, st, rec, tc.doc) {
						t.Errorf("dying at operation %d of %d, then up: record %s, starting %v, target %v, plan\n%s\nwant up, none starting, no target, the file's plan",
							i, n, rec.Status, rec.Starting, rec.Target != nil, planJSON(t, rec.Plan))
					}
				}
			}
		})
	}
}

// TestPrune: an up that cannot trust the record (a change was interrupted) deletes the devices
// of the network that the plan does not name, found by their names, and what the node kind
// keeps for nodes that died; only among what trellis made for this network.
func TestPrune(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(f *fakeMachine, id string) // what happened since the network went up
		doc    string
		gone   []string // state lines that must be gone
	}{
		{"a device left by an interrupted change", func(f *fakeMachine, id string) {
			f.add(plan.DeviceName(id, 'b', 99), &fakeDev{mtu: 1500})
			f.add(plan.DeviceName(id, 'p', 98), &fakeDev{mtu: 1500, node: id + "/a", ifname: "eth9"})
		}, netV1, []string{"b99 ", "p98 "}},
		{"a node that died and left the file", func(f *fakeMachine, id string) {
			f.stop(id + "/c") // killed: what the kind keeps for it stays
		}, strings.Replace(strings.Replace(strings.Replace(netV1, ", eth2: [10.0.1.2/24]", "", 1),
			"  c: {kind: fakenode, addresses: {eth1: [10.0.1.3/24]}, exec: [echo hello]}\n", "", 1),
			"  - {name: bc, endpoints: [b:eth2, c:eth1], connector: fakebridge}\n", "", 1), []string{"kept ID/c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := withForeign(fresh(t, tc.doc)) // before newFake: the fake kinds act on the last
			f := newFake()
			foreign(f)
			st := fakeStore(t)
			mustUp(t, f, st, netV1)
			id := record(t, st).NetID
			f.mu.Lock()
			tc.before(f, id)
			f.mu.Unlock()
			if err := st.MarkChanging("net"); err != nil {
				t.Fatal(err)
			}
			mustUp(t, f, st, tc.doc)
			rec := record(t, st)
			got := named(f, rec.Plan)
			if got != want {
				t.Errorf("the machine has\n%s\nwant as made from the file, and what trellis did not make:\n%s", got, want)
			}
			if err := down(f.run(0, false), st, "net"); err != nil {
				t.Fatal(err)
			}
			if s := f.state(); s != foreignState {
				t.Errorf("after down the machine has\n%s\nwant only what trellis did not make:\n%s", s, foreignState)
			}
		})
	}
}

// TestLinkStateLive: trellis link down, and an impairment set live, change only that link's
// ports, keep the nodes, and a failure at any of their operations takes the network back.
func TestLinkStateLive(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(ctx context.Context, st *state.Store) error
		want string // a line of the machine's state after the change
	}{
		{"link down", func(ctx context.Context, st *state.Store) error {
			return SetLinkState(ctx, st, "net", "bc", "", false, Options{})
		}, "dev port(c:eth1) mtu=1500 up=false"},
		{"endpoint loss", func(ctx context.Context, st *state.Store) error {
			return SetImpairment(ctx, st, "net", "ab", "a:eth1", spec.Impairment{Loss: 25}, Options{})
		}, "dev port(a:eth1) mtu=1500 up=true rate=10000000 impair={Loss:25 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := withForeign(fresh(t, netV1))
			f := newFake()
			foreign(f)
			st := fakeStore(t)
			mustUp(t, f, st, netV1)
			pids := f.pids()
			if err := tc.set(f.run(0, false), st); err != nil {
				t.Fatal(err)
			}
			n := len(f.ops)
			rec := record(t, st)
			if got := named(f, rec.Plan); !strings.Contains(got, tc.want) || !maps.Equal(f.pids(), pids) {
				t.Errorf("after the change the machine has\n%s\nwant a line with %q, no node restarted", got, tc.want)
			}
			for i := 1; i <= n; i++ {
				f := newFake()
				foreign(f)
				st := fakeStore(t)
				mustUp(t, f, st, netV1)
				was := record(t, st)
				err := tc.set(f.run(i, false), st)
				if !errors.Is(err, errFakeFail) || !strings.Contains(err.Error(), "taken back") {
					t.Fatalf("failing operation %d of %d: %v, want the failure, taken back", i, n, err)
				}
				rec := record(t, st)
				if got := named(f, rec.Plan); got != want {
					t.Errorf("failing operation %d of %d (%s): the machine has\n%s\nwant as before:\n%s", i, n, f.ops[i-1], got, want)
				}
				if rec.Status != state.Up || planJSON(t, rec.Plan) != planJSON(t, was.Plan) {
					t.Errorf("failing operation %d of %d: record %s with plan\n%s\nwant up with the plan as before", i, n, rec.Status, planJSON(t, rec.Plan))
				}
			}
		})
	}
}
