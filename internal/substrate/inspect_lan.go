package substrate

import (
	"sort"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/rtnl"
)

// LANInfo is a LAN connector's forwarding table, as learnt, and its counters.
type LANInfo struct {
	Table    int                   `json:"table"`          // size limit, in addresses
	Ageing   float64               `json:"ageing_seconds"` // how long an address is kept after its last frame
	Entries  []LANEntryInfo        `json:"entries"`
	Counters dataplane.LANCounters `json:"counters"`
	Error    string                `json:"error,omitempty"` // why the table could not be read
}

// LANEntryInfo is one learnt address: the member it is behind and how long since its last
// frame.
type LANEntryInfo struct {
	MAC    string  `json:"mac"`
	Member string  `json:"member"` // NODE:IFNAME of a port, or "tunnel to HOST"
	Idle   float64 `json:"idle_seconds"`
}

// lanInfo reads the table of LAN link l through one of its members that is a device of
// devs (the table is one per LAN, shared by its members); nil for a link of another connector
// or without a member device on this machine.
func lanInfo(l *plan.Link, devs map[string]rtnl.Link) *LANInfo {
	if l.Connector != "lan" {
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
	li := &LANInfo{Table: l.Table, Ageing: l.Ageing.Seconds()}
	if li.Table == 0 {
		li.Table = dataplane.DefaultLANEntries
	}
	if l.Ageing == 0 {
		li.Ageing = dataplane.DefaultLANAging.Seconds()
	}
	entries, counters, err := dataplane.ReadLAN(via)
	if err != nil {
		li.Error = err.Error()
		return li
	}
	li.Counters = counters
	for _, e := range entries {
		m, ok := members[e.Ifindex]
		if !ok {
			m = "gone member"
		}
		li.Entries = append(li.Entries, LANEntryInfo{MAC: e.MAC.String(), Member: m, Idle: e.Idle.Seconds()})
	}
	sort.Slice(li.Entries, func(i, j int) bool { return li.Entries[i].MAC < li.Entries[j].MAC })
	return li
}
