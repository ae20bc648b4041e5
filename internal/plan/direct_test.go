package plan_test

import (
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// A point-to-point link that names no connector and has nothing to enforce outside its nodes
// is one veth pair (the wire kind); anything to enforce, a named connector, a node whose kind
// cannot pair, or another machine gives it ports.
func TestDirectLinks(t *testing.T) {
	const base = `name: d
nodes:
  a: {NODE}
  b:
links:
  - endpoints: [a:eth1, b:eth1]
LINK`
	cases := []struct {
		name, node, link, want string
	}{
		{"no connector", "", "NONE", "shortbridge"},
		{"plain", "", "", "veth"},
		{"rate", "", "    rate: 10mbit\n", "shortbridge"},
		{"loss", "", "    loss: 1%\n", "shortbridge"},
		{"loss from one end", "", "    from: {b:eth1: {loss: 1%}}\n", "shortbridge"},
		{"delay", "", "    delay: 5ms\n", "shortbridge"},
		{"down", "", "    state: down\n", "shortbridge"},
		{"connector named", "", "    connector: shortbridge\n", "shortbridge"},
		{"veth named", "", "    connector: veth\n", "veth"},
		{"bridge named", "", "    connector: bridge\n", "bridge"},
		{"engines", "engines: 2", "", "shortbridge"},
		{"a kind that cannot pair", "kind: " + testVMKind, "", "shortbridge"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			link := c.link
			switch {
			case link == "NONE":
				link = ""
			case !strings.Contains(link, "connector:"):
				link = "    connector: auto\n" + link
			}
			doc := strings.NewReplacer("NODE", c.node, "LINK", link).Replace(base)
			p, err := plan.Make(parse(t, doc), "scope", "", &plan.Names{})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Links[0].Connector; got != c.want {
				t.Errorf("connector %s, want %s", got, c.want)
			}
		})
	}
}

// A live change that takes a direct link's carrier away or impairs it gives it its ports.
func TestPlugPorts(t *testing.T) {
	n := parse(t, "name: d\nnodes:\n  a:\n  b:\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n    connector: auto\n")
	for _, edit := range []func(l *plan.Link){
		func(l *plan.Link) { l.Down = true },
		func(l *plan.Link) { l.Ports[1].Down = true },
		func(l *plan.Link) { l.Ports[0].Impair.Loss = 5 },
	} {
		p, err := plan.Make(n, "scope", "", &plan.Names{})
		if err != nil {
			t.Fatal(err)
		}
		p.PlugPorts()
		if p.Links[0].Connector != "veth" {
			t.Fatalf("unchanged: connector %s, want veth", p.Links[0].Connector)
		}
		edit(p.Links[0])
		p.PlugPorts()
		if p.Links[0].Connector != "shortbridge" {
			t.Errorf("connector %s after the change, want shortbridge", p.Links[0].Connector)
		}
	}
}

// A link that names the veth connector refuses what only a port can enforce.
func TestVethRefusesWhatNeedsPorts(t *testing.T) {
	for _, key := range []string{"rate: 10mbit", "loss: 1%", "state: down", "from: {a:eth1: {delay: 5ms}}"} {
		doc := "name: d\nnodes:\n  a:\n  b:\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n    connector: veth\n    " + key + "\n"
		_, err := spec.Parse("topo.yaml", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), "topo.yaml:8") || !strings.Contains(err.Error(), "remove `connector: veth`") {
			t.Errorf("%s on a veth link: %v, want an error at topo.yaml:8 saying to remove the connector", key, err)
		}
	}
}
