package substrate

import (
	"encoding/json"
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
	// The fake machine models the root namespace's devices, not port namespaces.
	return Up(f.run(failAt, die), st, n, "", "net.yaml", Options{PortNS: "root"})
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

// planJSON is plan p as the record keeps it.
func planJSON(t *testing.T, p *plan.Plan) string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// filePlan is the plan of doc with the names of record rec: what rec's plan is once up of doc
// is done.
func filePlan(t *testing.T, st *state.Store, rec *state.Record, doc string) string {
	t.Helper()
	n, err := spec.Parse("net.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	names := rec.Names.Clone()
	names.NetID = rec.NetID
	p, err := plan.Make(n, st.ID, "", names)
	if err != nil {
		t.Fatal(err)
	}
	return planJSON(t, p)
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
			if got, want := planJSON(t, rec.Plan), filePlan(t, st, rec, tc.doc); rec.Status != state.Up || got != want {
				t.Errorf("record %s with plan\n%s\nwant up with the file's:\n%s", rec.Status, got, want)
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
