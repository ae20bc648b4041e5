package kinds

import (
	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/plan"
)

// Optional parts of link and tunnel kinds that `trellis inspect` shows.

// TableReader is a link kind that keeps a forwarding table of its own (the lan connector):
// `trellis inspect` shows it. The substrate asks for it with a type assertion.
type TableReader interface {
	// ReadTable reads link l's table through its member device of index via; members name
	// the link's member devices by index ("NODE:IFNAME", "tunnel to HOST").
	ReadTable(l *plan.Link, via int, members map[int]string) *TableInfo
}

// TableInfo is a link's forwarding table, as learnt, and its counters.
type TableInfo struct {
	Table    int                   `json:"table"`          // size limit, in addresses
	Ageing   float64               `json:"ageing_seconds"` // how long an address is kept after its last frame
	Entries  []TableEntry          `json:"entries"`
	Counters dataplane.LANCounters `json:"counters"`
	Error    string                `json:"error,omitempty"` // why the table could not be read
}

// TableEntry is one learnt address: the member it is behind and how long since its last
// frame.
type TableEntry struct {
	MAC    string  `json:"mac"`
	Member string  `json:"member"` // NODE:IFNAME of a port, or "tunnel to HOST"
	Idle   float64 `json:"idle_seconds"`
}

// Counter is a tunnel kind whose machine-wide counters `trellis inspect` shows (egre and vxlan:
// their decapsulation program's, which also vets VXLAN packets' sources). The substrate asks
// for it with a type assertion.
type Counter interface {
	Counters(env *Env) *dataplane.EGRECounters
}
