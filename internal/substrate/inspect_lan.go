package substrate

import (
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/rtnl"
)

// LANInfo is a link kind's forwarding table, as learnt, and its counters (the lan connector's).
type LANInfo = kinds.TableInfo

// LANEntryInfo is one learnt address of a forwarding table.
type LANEntryInfo = kinds.TableEntry

// lanInfo reads the forwarding table of link l through one of its members that is a device of
// devs, if its kind keeps one (kinds.TableReader); nil for a link of another kind or without a
// member device on this machine.
func lanInfo(l *plan.Link, devs map[string]rtnl.Link) *LANInfo {
	k, err := kinds.LinkKind(l.Connector)
	tr, ok := k.(kinds.TableReader)
	if err != nil || !ok {
		return nil
	}
	members := map[int]string{}
	via := 0
	for _, p := range l.Ports {
		if d, ok := devs[p.Name]; ok {
			members[d.Index] = p.Node + ":" + p.Ifname
			via = d.Index
		}
	}
	for _, t := range l.Tunnels {
		if d, ok := devs[t.Device]; ok {
			members[d.Index] = "tunnel to " + t.Host
			via = d.Index
		}
	}
	if via == 0 {
		return nil
	}
	return tr.ReadTable(l, via, members)
}
