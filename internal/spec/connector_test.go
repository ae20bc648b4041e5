package spec

import (
	"fmt"
	"strings"
	"testing"
)

// A link that names no connector gets the default one for its endpoints: a point-to-point link
// may be one veth pair while it has nothing to enforce (DefaultConnector, as `connector: auto`),
// a LAN never; a connector named is that connector, always with its ports.
func TestDefaultConnector(t *testing.T) {
	for _, c := range []struct {
		name, connector, endpoints string
		want                       string
		direct                     bool
	}{
		{"point-to-point, none named", "", "a:eth1, b:eth1", DefaultP2PConnector, true},
		{"point-to-point, auto", AutoConnector, "a:eth1, b:eth1", DefaultP2PConnector, true},
		{"point-to-point, shortbridge named", Shortbridge, "a:eth1, b:eth1", Shortbridge, false},
		{"point-to-point, bridge named", "bridge", "a:eth1, b:eth1", "bridge", false},
		{"LAN, none named", "", "a:eth1, b:eth1, c:eth1", DefaultLANConnector, false},
		{"LAN, auto", AutoConnector, "a:eth1, b:eth1, c:eth1", DefaultLANConnector, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := fmt.Sprintf("name: t\nnodes:\n  a:\n  b:\n  c:\nlinks:\n  - endpoints: [%s]\n", c.endpoints)
			if c.connector != "" {
				doc += "    connector: " + c.connector + "\n"
			}
			n, err := Parse("topo.yaml", []byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			l := n.Links[0]
			if l.Connector != c.want || l.DefaultConnector != c.direct {
				t.Errorf("%s: connector %s, may be direct %v; want %s, %v", strings.TrimSpace(doc), l.Connector, l.DefaultConnector, c.want, c.direct)
			}
		})
	}
}
