package plan

import "github.com/trellisnet/trellis/internal/spec"

// direct joins link pl with the wire link kind (Wirer: one veth pair between its two nodes, no
// port in the substrate) when the file names no connector for it, or `connector: auto`
// (sl.DefaultConnector), it has nothing to
// enforce outside its nodes (NeedsPorts) and the wire kind can join its nodes' kinds.
func (p *Plan) direct(sl *spec.Link, pl *Link) {
	wire, w := wireKind()
	if wire == "" || !sl.DefaultConnector || pl.NeedsPorts() {
		return
	}
	a, b := p.Node(pl.Ports[0].Node), p.Node(pl.Ports[1].Node)
	if a == nil || b == nil || !w.Wires(a.Kind, b.Kind) {
		return
	}
	pl.Connector = wire
}

// WireEnforces tells whether the wire link kind can take a link down and impair its frames
// (loss, duplication, corruption) on the nodes' own interfaces, where a node's root cannot
// lift it (tcx, Linux 6.6). The wire kind sets it; without it, those need ports.
var WireEnforces = func() bool { return false }

// NeedsPorts tells whether link l needs its ports in the substrate: it is not point-to-point
// between two nodes of this machine (tunnels), or something must be enforced outside its nodes,
// where a node's root cannot lift it: a rate, a delay or jitter, a node's forwarding engines
// (their classifier is on the port), and, unless the wire kind enforces them (WireEnforces),
// a carrier taken away and loss, duplication or corruption.
func (l *Link) NeedsPorts() bool {
	return l.needsPorts(WireEnforces())
}

// NeedsPortsAlways tells whether link l needs its ports even on a kernel where the wire kind
// takes a link down and impairs it (WireEnforces).
func (l *Link) NeedsPortsAlways() bool { return l.needsPorts(true) }

func (l *Link) needsPorts(onWire bool) bool {
	if len(l.Ports) != 2 || len(l.Tunnels) > 0 || l.Rate > 0 {
		return true
	}
	if l.Down && !onWire {
		return true
	}
	for _, port := range l.Ports {
		if port.Classify || port.Impair.Delays() || (!onWire && (port.Down || !port.Impair.IsZero())) {
			return true
		}
	}
	return false
}

// PlugPorts gives the ports back to each wire link of p that needs them now (NeedsPorts: a
// live change took its carrier away or impaired it): it is joined by the default
// point-to-point connector instead. The reverse is left to the next `up` of the file.
func (p *Plan) PlugPorts() {
	wire, _ := wireKind()
	for _, l := range p.Links {
		if l.Connector == wire && wire != "" && l.NeedsPorts() {
			l.Connector = spec.DefaultP2PConnector
		}
	}
}
