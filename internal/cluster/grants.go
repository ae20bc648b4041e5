package cluster

import (
	"fmt"
	"strings"

	"github.com/trellisnet/trellis/internal/spec"
)

// Refuses says which settings of network sn the quota does not grant, naming the node, the
// field and the grant ("node r1: vm.priority needs the quota's realtime grant"), or "".
func (q Quota) Refuses(sn *spec.Network) string {
	var out []string
	need := func(nd *spec.Node, field, grant string) {
		out = append(out, fmt.Sprintf("node %s: %s needs the quota's %s grant (trellis tenant quota NAME --%s, by the administrator)", nd.Name, field, grant, grant))
	}
	granted := map[string]bool{spec.GrantRealtime: q.Realtime, spec.GrantPin: q.Pin}
	for _, nd := range sn.Nodes {
		if s, ok := nd.KindSettings().(spec.Granted); ok {
			for _, g := range s.Grants() {
				if !granted[g.Grant] {
					need(nd, g.Field, g.Grant)
				}
			}
		}
		if q.Pin {
			continue
		}
		if nd.Cpuset != "" {
			need(nd, "cpuset", "pin")
		}
		for i, e := range nd.Engines {
			if len(e.CPUs) > 0 {
				need(nd, fmt.Sprintf("engines[%d].cpus", i), "pin")
			}
		}
	}
	return strings.Join(out, "; ")
}
