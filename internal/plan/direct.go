package plan

import "github.com/trellisnet/trellis/internal/spec"

// direct joins link pl with the wire link kind (spec.WireLinkKind: one veth pair between its
// two nodes, no port in the substrate) when the file says `connector: auto` for it (sl) and it
// has nothing to enforce outside its nodes (NeedsPorts).
func (p *Plan) direct(sl *spec.Link, pl *Link) {
	wire := spec.WireLinkKind()
	if wire == "" || !sl.DefaultConnector || pl.NeedsPorts() {
		return
	}
	for _, port := range pl.Ports {
		n := p.Node(port.Node)
		if n == nil {
			return
		}
		if k, _ := spec.LookupNodeKind(n.Kind); !k.Pairs {
			return
		}
	}
	pl.Connector = wire
}

// NeedsPorts tells whether link l needs its ports in the substrate: it is not point-to-point
// between two nodes of this machine (tunnels), or something must be enforced outside its nodes,
// where a node's root cannot lift it: a rate, an impairment (delay included), a carrier taken
// away, or a node's forwarding engines (their classifier is on the port).
func (l *Link) NeedsPorts() bool {
	if len(l.Ports) != 2 || len(l.Tunnels) > 0 || l.Rate > 0 || l.Down {
		return true
	}
	for _, port := range l.Ports {
		if !port.Impair.IsZero() || port.Down || port.Classify {
			return true
		}
	}
	return false
}

// PlugPorts gives the ports back to each wire link of p that needs them now (NeedsPorts: a
// live change took its carrier away or impaired it): it is joined by the default
// point-to-point connector instead. The reverse is left to the next `up` of the file.
func (p *Plan) PlugPorts() {
	wire := spec.WireLinkKind()
	for _, l := range p.Links {
		if l.Connector == wire && wire != "" && l.NeedsPorts() {
			l.Connector = spec.DefaultP2PConnector
		}
	}
}
