package substrate

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
)

// The reconciler's unit tests: Up, live changes and Down on the fake machine (fake_test.go),
// without root.

// netV1 is a network of three nodes and two links; the tests change it.
const netV1 = `name: net
nodes:
  a: {kind: fakenode, addresses: {eth1: [10.0.0.1/24]}}
  b: {kind: fakenode, addresses: {eth1: [10.0.0.2/24], eth2: [10.0.1.2/24]}}
  c: {kind: fakenode, addresses: {eth1: [10.0.1.3/24]}, exec: [echo hello]}
links:
  - {name: ab, endpoints: [a:eth1, b:eth1], connector: fakebridge, rate: 10mbit}
  - {name: bc, endpoints: [b:eth2, c:eth1], connector: fakebridge}
`

// edit returns netV1 with each old string replaced by the new one after it.
func edit(t *testing.T, pairs ...string) string {
	t.Helper()
	doc := netV1
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(doc, pairs[i]) {
			t.Fatalf("netV1 has no %q", pairs[i])
		}
		doc = strings.Replace(doc, pairs[i], pairs[i+1], 1)
	}
	return doc
}

// fakeStore is a state directory of its own.
func fakeStore(t *testing.T) *state.Store {
	t.Helper()
	st, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// upFake runs up of doc on the fake: operation failAt fails (0: none), or with die the
// process dies there.
func upFake(t *testing.T, f *fakeMachine, st *state.Store, doc string, failAt int, die bool) (*Result, error) {
	t.Helper()
	n, err := spec.Parse("net.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return UpWith(f.run(failAt, die), st, n, "", "net.yaml", io.Discard, Options{})
}

// mustUp is upFake that must succeed; it returns the operations it did.
func mustUp(t *testing.T, f *fakeMachine, st *state.Store, doc string) (*Result, []string) {
	t.Helper()
	res, err := upFake(t, f, st, doc, 0, false)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	return res, f.ops
}

// fresh is the state of the fake after up of doc on an empty machine.
func fresh(t *testing.T, doc string) string {
	t.Helper()
	f := newFake()
	st := fakeStore(t)
	mustUp(t, f, st, doc)
	return named(f, record(t, st).Plan)
}

// named is the state of the fake with the devices of plan p named by what they are: a link's
// connector "bridge(ab)", a port "port(a:eth1)", and the network's id "ID".
func named(f *fakeMachine, p *plan.Plan) string {
	s := f.state()
	for _, l := range p.Links {
		s = strings.ReplaceAll(s, l.Device+" ", "bridge("+l.Name+") ")
		s = strings.ReplaceAll(s, "master="+l.Device, "master=bridge("+l.Name+")")
		for _, port := range l.Ports {
			s = strings.ReplaceAll(s, port.Name+" ", "port("+port.String()+") ")
		}
	}
	lines := strings.Split(strings.ReplaceAll(s, p.NetID, "ID"), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// record loads the network's record.
func record(t *testing.T, st *state.Store) *state.Record {
	t.Helper()
	rec, err := st.Load("net")
	if err != nil || rec == nil {
		t.Fatalf("record: %v, %v", rec, err)
	}
	return rec
}

// digests are the nodes and their digests of plan p, and its links: what a record's plan is.
func planOf(p *plan.Plan) string {
	if p == nil {
		return "<nil>"
	}
	var b strings.Builder
	for _, n := range p.Nodes {
		b.WriteString(n.Name + "=" + n.Digest + " ")
	}
	for _, l := range p.Links {
		b.WriteString(l.Name + ":" + rateText(l.Rate) + ":" + mtuText(l.MTU) + " ")
	}
	return b.String()
}

// TestCreateAndRemove: up makes every node, port and connector of a new network, configured,
// and down removes everything, its record too.
func TestCreateAndRemove(t *testing.T) {
	f := newFake()
	st := fakeStore(t)
	res, _ := mustUp(t, f, st, netV1)
	if !res.Created || res.Nodes != 3 || res.Links != 2 {
		t.Errorf("result %+v, want created, 3 nodes, 2 links", res)
	}
	rec := record(t, st)
	if rec.Status != state.Up || len(rec.Nodes) != 3 || len(rec.Starting) != 0 {
		t.Errorf("record status %s nodes %v starting %v, want up, 3 pids, none starting", rec.Status, rec.Nodes, rec.Starting)
	}
	got := named(f, rec.Plan)
	for _, want := range []string{
		"dev port(a:eth1) mtu=1500 up=true rate=10000000 impair={Loss:0 LossCorrelation:0 Duplicate:0 Corrupt:0} node=ID/a master=bridge(ab)",
		"dev port(c:eth1) mtu=1500 up=true rate=0", "dev bridge(ab) mtu=1500 up=true", "dev bridge(bc) mtu=1500 up=true",
		"node ID/a digest=", "node ID/c digest=", "execs=1", "kept ID/b",
		"addrs ID/b/eth2 [10.0.1.2/24]", "addrs ID/c/eth1 [10.0.1.3/24]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("after up the machine has\n%s\nwant a line with %q", got, want)
		}
	}
	if strings.Count(got, "dev ") != 6 {
		t.Errorf("after up the machine has\n%s\nwant 4 ports and 2 connectors", got)
	}
	if err := down(f.run(0, false), st, "net"); err != nil {
		t.Fatal(err)
	}
	if s := f.state(); s != "" {
		t.Errorf("after down the machine has\n%s\nwant nothing", s)
	}
	if rec, err := st.Load("net"); rec != nil || err != nil {
		t.Errorf("after down the record is %v, %v; want none", rec, err)
	}
}

// TestChange: a live change of a running network leaves the machine as a network made from the
// new file would be, restarts only the nodes whose settings changed, and touches only what
// changed.
func TestChange(t *testing.T) {
	for _, tc := range []struct {
		name      string
		doc       string
		restarted []string // the nodes started again (or stopped)
		touch     []string // operations the change does (substrings)
		notTouch  []string // operations it does not do
		anew      bool     // a's interface is made anew: what its software put there goes
	}{
		{name: "rate", doc: edit(t, "rate: 10mbit", "rate: 20mbit"),
			touch: []string{"shaper port(a:eth1)", "shaper port(b:eth1)"}, notTouch: []string{"port(b:eth2)", "configure", "start", "exec"}},
		{name: "rate removed", doc: edit(t, ", rate: 10mbit", ""),
			touch: []string{"shaper port(a:eth1)"}, notTouch: []string{"bc", "configure"}},
		{name: "loss", doc: edit(t, "connector: fakebridge}", "connector: fakebridge, loss: 5%}"),
			touch: []string{"impair port(b:eth2)", "impair port(c:eth1)"}, notTouch: []string{"port(a:eth1)", "configure"}},
		{name: "link down", doc: edit(t, "connector: fakebridge}", "connector: fakebridge, state: down}"),
			touch: []string{"carrier port(c:eth1)"}, notTouch: []string{"carrier port(a:eth1)", "configure"}},
		{name: "addresses", doc: edit(t, "[10.0.0.1/24]", "[10.0.0.11/24]"),
			touch: []string{"configure a/eth1"}, notTouch: []string{"configure b/", "start"}},
		{name: "mtu", doc: edit(t, "rate: 10mbit}", "rate: 10mbit, mtu: 9000}"),
			touch: []string{"port port(a:eth1)", "port port(b:eth1)"}, notTouch: []string{"port port(b:eth2)"}, anew: true},
		{name: "node added with a link", doc: strings.Replace(netV1, "links:\n", "  d: {kind: fakenode, addresses: {eth1: [10.0.2.4/24]}}\nlinks:\n", 1) +
			"  - {name: cd, endpoints: [c:eth2, d:eth1], connector: fakebridge}\n", restarted: []string{"d"},
			touch: []string{"start d", "join cd", "exec d"}, notTouch: []string{"join ab", "join bc", "start a", "exec c"}},
		{name: "node and link removed", doc: strings.Replace(strings.Replace(strings.Replace(netV1, ", eth2: [10.0.1.2/24]", "", 1), "  c: {kind: fakenode, addresses: {eth1: [10.0.1.3/24]}, exec: [echo hello]}\n", "", 1),
			"  - {name: bc, endpoints: [b:eth2, c:eth1], connector: fakebridge}\n", "", 1), restarted: []string{"c"},
			touch: []string{"stop c", "delete bridge(bc)", "delete port(b:eth2)"}, notTouch: []string{"join", "start"}},
		{name: "node settings", doc: edit(t, "echo hello", "echo bye"), restarted: []string{"c"},
			touch: []string{"stop c", "start c", "port port(c:eth1)", "join bc", "exec c"}, notTouch: []string{"start a", "start b", "join ab"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := fresh(t, tc.doc)
			f := newFake()
			st := fakeStore(t)
			mustUp(t, f, st, netV1)
			before := f.pids()
			p1 := record(t, st).Plan
			// Something the node's software made on an interface stays through the change.
			id := p1.NetID
			f.addrs[id+"/a/eth1"] = append(f.addrs[id+"/a/eth1"], "10.9.9.9/32")
			res, _ := mustUp(t, f, st, tc.doc)
			rec := record(t, st)
			if len(res.Changes) == 0 || res.Created {
				t.Errorf("result %+v: want changes, not created", res)
			}
			if rec.Status != state.Up || planOf(rec.Plan) == planOf(p1) && tc.name != "loss" && tc.name != "link down" && tc.name != "addresses" {
				t.Errorf("record %s with plan %s (was %s): want up with the new plan", rec.Status, planOf(rec.Plan), planOf(p1))
			}
			own := f.addrs[id+"/a/eth1"]
			if slices.Contains(own, "10.9.9.9/32") == tc.anew {
				t.Errorf("a/eth1 has %v: want the node's own 10.9.9.9/32 kept unless its interface is made anew (%v)", own, tc.anew)
			}
			f.addrs[id+"/a/eth1"] = slices.DeleteFunc(own, func(a string) bool { return a == "10.9.9.9/32" })
			if got := named(f, rec.Plan); got != want {
				t.Errorf("after the change the machine has\n%s\nwant as made from the file:\n%s", got, want)
			}
			var restarted []string
			after := f.pids()
			for key, pid := range before {
				if after[key] != pid {
					restarted = append(restarted, strings.TrimPrefix(key, id+"/"))
				}
			}
			for key := range after {
				if _, ok := before[key]; !ok {
					restarted = append(restarted, strings.TrimPrefix(key, id+"/"))
				}
			}
			slices.Sort(restarted)
			if !slices.Equal(restarted, tc.restarted) {
				t.Errorf("nodes started or stopped: %v, want %v", restarted, tc.restarted)
			}
			ops := opsNamed(f.ops, rec.Plan, p1)
			for _, w := range tc.touch {
				if !strings.Contains(ops, w) {
					t.Errorf("operations\n%s\nwant one with %q", ops, w)
				}
			}
			for _, w := range tc.notTouch {
				if strings.Contains(ops, w) {
					t.Errorf("operations\n%s\nwant none with %q", ops, w)
				}
			}
		})
	}
}

// opsNamed are the operations ops, one a line, with the devices of plans ps named (named).
func opsNamed(ops []string, ps ...*plan.Plan) string {
	s := strings.Join(ops, "\n") + "\n"
	for _, p := range ps {
		for _, l := range p.Links {
			s = strings.ReplaceAll(s, l.Device+"\n", "bridge("+l.Name+")\n")
			for _, port := range l.Ports {
				s = strings.ReplaceAll(s, port.Name+"\n", "port("+port.String()+")\n")
			}
		}
	}
	return s
}

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
				if rec.Status != state.Up || planOf(rec.Plan) != planOf(was.Plan) || rec.File != was.File || rec.Target != nil {
					t.Errorf("failing operation %d of %d: record %s, plan %s, file %s, target %v; want up, %s, %s, none",
						i, n, rec.Status, planOf(rec.Plan), rec.File, rec.Target != nil, planOf(was.Plan), was.File)
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
					if rec.Status != state.Up || len(rec.Starting) > 0 || rec.Target != nil {
						t.Errorf("dying at operation %d of %d, then up: record %s, starting %v, target %v; want up, none starting, no target", i, n, rec.Status, rec.Starting, rec.Target != nil)
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
