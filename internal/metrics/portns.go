package metrics

import (
	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/rtnl"
	"github.com/trellisnet/trellis/internal/substrate"
	"golang.org/x/sys/unix"
)

// portNS is what a scrape read of a network whose ports are in a port namespace of its own
// (substrate.PortNSEnv): its devices and their shapers' drops, read there. The node-side
// counters of such a network are read from inside each node (network.direct), since the
// ports' peers are named by that namespace's ids, not the root's.
type portNS struct {
	devs   map[string]rtnl.Link
	shaper map[int]uint64
	impair map[int]dataplane.ImpairCounters
}

// readPortNS reads network n's port namespace if it has one (nil otherwise, or if it cannot be
// read: counters are for show).
func readPortNS(n *network) *portNS {
	ns, ok, err := substrate.OpenPortNS(n.rec.NetID)
	if err != nil || !ok {
		return nil
	}
	defer ns.Close()
	out := &portNS{shaper: map[int]uint64{}, impair: map[int]dataplane.ImpairCounters{}}
	err = netnsutil.Do(ns, func() error {
		conn, err := rtnl.Dial()
		if err != nil {
			return err
		}
		defer conn.Close()
		if out.devs, err = linksByName(conn); err != nil {
			return err
		}
		if shaped(n.rec.Plan) {
			if drops, err := conn.QdiscDrops("tbf"); err == nil {
				out.shaper = drops
			}
		}
		for _, l := range n.rec.Plan.Links {
			for _, p := range l.Ports {
				if d, ok := out.devs[p.Name]; ok && !p.Impair.IsZero() {
					if ic, err := dataplane.ReadImpairCounters(d.Index); err == nil {
						out.impair[d.Index] = ic
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil
	}
	return out
}

// readPortIn adds the metrics of one port of a network with a port namespace: its state, its
// shaper's and impairment's counters from there, its interface's counters from inside the node.
func (c *Collector) readPortIn(s *snapshot, n *network, lv []string, port plan.Port) {
	a, ok := n.ports.devs[port.Name]
	if !ok {
		s.out.add(famPortUp, 0, lv...)
		return
	}
	st := n.direct[port.Node][port.Ifname]
	s.out.add(famPortUp, boolValue(a.Flags&unix.IFF_UP != 0), lv...)
	s.addStats(st, lv)
	s.out.add(famShaper, n.ports.shaper[a.Index], lv...)
	if ic, ok := n.ports.impair[a.Index]; ok {
		s.addImpair(ic, lv)
	}
}
