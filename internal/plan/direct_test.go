package plan_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// A point-to-point link that names no connector (or auto) and has nothing to enforce outside
// its nodes is one veth pair (the wire kind); anything to enforce, a named connector, a node whose kind
// cannot pair, or another machine gives it ports. On a kernel with tcx (plan.WireEnforces),
// a link taken down or losing, duplicating or corrupting frames stays one veth pair; a delay
// still needs ports.
func TestDirectLinks(t *testing.T) {
	const base = `name: d
nodes:
  a: {NODE}
  b:
links:
  - endpoints: [a:eth1, b:eth1]
LINK`
	cases := []struct {
		name, node, link, want, tcx string // tcx: the connector with WireEnforces
	}{
		{"no connector", "", "NONE", "veth", "veth"},
		{"plain", "", "", "veth", "veth"},
		{"rate", "", "    rate: 10mbit\n", "shortbridge", "shortbridge"},
		{"loss", "", "    loss: 1%\n", "shortbridge", "veth"},
		{"corrupt and duplicate", "", "    corrupt: 1%\n    duplicate: 1%\n", "shortbridge", "veth"},
		{"loss from one end", "", "    from: {b:eth1: {loss: 1%}}\n", "shortbridge", "veth"},
		{"delay", "", "    delay: 5ms\n", "shortbridge", "shortbridge"},
		{"delay from one end", "", "    from: {b:eth1: {delay: 5ms}}\n", "shortbridge", "shortbridge"},
		{"down", "", "    state: down\n", "shortbridge", "veth"},
		{"connector named", "", "    connector: shortbridge\n", "shortbridge", "shortbridge"},
		{"veth named", "", "    connector: veth\n", "veth", "veth"},
		{"bridge named", "", "    connector: bridge\n", "bridge", "bridge"},
		{"engines", "engines: 2", "", "shortbridge", "shortbridge"},
		{"a kind that cannot pair", "kind: vm", "", "shortbridge", "shortbridge"},
	}
	for _, tcx := range []bool{false, true} {
		withWireEnforces(t, tcx, func() {
			for _, c := range cases {
				want := c.want
				if tcx {
					want = c.tcx
				}
				t.Run(fmt.Sprintf("%s/tcx=%v", c.name, tcx), func(t *testing.T) { checkConnector(t, base, c.node, c.link, want) })
			}
		})
	}
}

// withWireEnforces runs f with plan.WireEnforces telling tcx, then puts it back.
func withWireEnforces(t *testing.T, tcx bool, f func()) {
	t.Helper()
	was := plan.WireEnforces
	plan.WireEnforces = func() bool { return tcx }
	defer func() { plan.WireEnforces = was }()
	f()
}

// checkConnector plans the network of doc base with node and link filled in, and checks the
// connector of its link.
func checkConnector(t *testing.T, base, node, link, want string) {
	t.Helper()
	switch {
	case link == "NONE":
		link = ""
	case !strings.Contains(link, "connector:"):
		link = "    connector: auto\n" + link
	}
	doc := strings.NewReplacer("NODE", node, "LINK", link).Replace(base)
	p, err := plan.Make(parse(t, doc), "scope", "", &plan.Names{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Links[0].Connector; got != want {
		t.Errorf("connector %s, want %s", got, want)
	}
}

// A live change that takes a direct link's carrier away or impairs it gives it its ports on a
// kernel without tcx; with tcx, only a delay or a rate does.
func TestPlugPorts(t *testing.T) {
	withWireEnforces(t, false, func() { plugPorts(t, false) })
	withWireEnforces(t, true, func() { plugPorts(t, true) })
}

func plugPorts(t *testing.T, tcx bool) {
	n := parse(t, "name: d\nnodes:\n  a:\n  b:\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n    connector: auto\n")
	for _, c := range []struct {
		edit    func(l *plan.Link)
		withTCX string // the connector after the change with tcx
	}{
		{func(l *plan.Link) { l.Down = true }, "veth"},
		{func(l *plan.Link) { l.Ports[1].Down = true }, "veth"},
		{func(l *plan.Link) { l.Ports[0].Impair.Loss = 5 }, "veth"},
		{func(l *plan.Link) { l.Ports[0].Impair.Delay = time.Millisecond }, "shortbridge"},
		{func(l *plan.Link) { l.Rate = 1e6 }, "shortbridge"},
	} {
		p, err := plan.Make(n, "scope", "", &plan.Names{})
		if err != nil {
			t.Fatal(err)
		}
		p.PlugPorts()
		if p.Links[0].Connector != "veth" {
			t.Fatalf("unchanged: connector %s, want veth", p.Links[0].Connector)
		}
		c.edit(p.Links[0])
		p.PlugPorts()
		want := "shortbridge"
		if tcx {
			want = c.withTCX
		}
		if p.Links[0].Connector != want {
			t.Errorf("tcx=%v: connector %s after the change, want %s", tcx, p.Links[0].Connector, want)
		}
	}
}

// A link that names the veth connector refuses what only a port can enforce: a rate and a
// delay always, a carrier taken away and loss only without tcx.
func TestVethRefusesWhatNeedsPorts(t *testing.T) {
	cases := []struct {
		key     string
		withTCX bool // refused with tcx too
	}{
		{"rate: 10mbit", true},
		{"from: {a:eth1: {delay: 5ms}}", true},
		{"jitter: 5ms", true},
		{"loss: 1%", false},
		{"state: down", false},
	}
	for _, tcx := range []bool{false, true} {
		withWireEnforces(t, tcx, func() {
			for _, c := range cases {
				doc := "name: d\nnodes:\n  a:\n  b:\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n    connector: veth\n    " + c.key + "\n"
				_, err := spec.Parse("topo.yaml", []byte(doc))
				switch {
				case tcx && !c.withTCX && err != nil:
					t.Errorf("%s on a veth link with tcx: %v, want it accepted", c.key, err)
				case (!tcx || c.withTCX) && (err == nil || !strings.Contains(err.Error(), "topo.yaml:8") || !strings.Contains(err.Error(), "remove `connector: veth`")):
					t.Errorf("%s on a veth link (tcx %v): %v, want an error at topo.yaml:8 saying to remove the connector", c.key, tcx, err)
				}
			}
		})
	}
}
