// Package veth is the link kind "veth": a point-to-point link with nothing to enforce outside
// its nodes, joined as containerlab and Mininet join two nodes, by one veth pair between the
// two nodes' network namespaces, with no port in the substrate (docs/design.md, decision 5).
// The plan chooses it for a point-to-point link that names no connector (or says `connector:
// auto`), has no rate,
// delay or tunnel, and whose nodes have no engines; the link gets ports (the shortbridge)
// again when it needs them. A link taken down, losing, duplicating or corrupting frames stays
// one pair: its ends are put down and its frames dropped or impaired by tcx programs on them
// (enforce.go), on Linux 6.6 and later. A file may also name it, for a link that must never
// have ports.
package veth

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Name is the kind's name in topology files.
const Name = "veth"

func init() {
	kinds.RegisterLink(Name, Kind{}, spec.LinkKind{MinEndpoints: 2, MaxEndpoints: 2, Check: check})
}

// Kind is the veth link kind.
type Kind struct{}

// Wires: one veth pair joins two nodes whose kinds keep their interfaces in a network
// namespace of the node's own on this machine (kinds.Namespaced); the plan then chooses this
// kind for a link that names no connector (plan.Wirer).
func (Kind) Wires(a, b string) bool { return kinds.IsNamespaced(a) && kinds.IsNamespaced(b) }

// check refuses, on a link that names this connector, what only a port can enforce: a rate,
// a delay or jitter and, on a kernel without tcx (plan.WireEnforces), a carrier taken away
// and loss, duplication or corruption.
func check(n *spec.Network, l *spec.Link) []*spec.Error {
	fix := "remove `connector: veth` (trellis then joins the link without ports while it has nothing to enforce)"
	onWire := plan.WireEnforces()
	var out []*spec.Error
	if l.Rate > 0 {
		out = append(out, n.LinkError(l, "rate", "a veth link has nothing outside its nodes to enforce a rate", fix))
	}
	if l.State == spec.StateDown && !onWire {
		out = append(out, n.LinkError(l, "state", "a veth link is taken down by tcx programs, and this kernel has none (Linux 6.6)", fix))
	}
	delays, impaired := l.Impair.Delays(), !l.Impair.IsZero()
	for _, im := range l.From {
		delays, impaired = delays || im.Delays(), impaired || !im.IsZero()
	}
	switch {
	case delays:
		out = append(out, n.LinkError(l, delayKey(l), "a veth link has nothing outside its nodes to delay its frames", fix))
	case impaired && !onWire:
		out = append(out, n.LinkError(l, impairKey(l), "a veth link is impaired by tcx programs, and this kernel has none (Linux 6.6)", fix))
	}
	return out
}

// delayKey is the first delay key the link gives, for the line of the message.
func delayKey(l *spec.Link) string {
	for _, key := range []string{"delay", "jitter"} {
		if l.FieldLine(key) != l.Line {
			return key
		}
	}
	return "from"
}

// impairKey is the first impairment key the link gives, for the line of the message.
func impairKey(l *spec.Link) string {
	for _, key := range []string{"loss", "duplicate", "corrupt", "from"} {
		if l.FieldLine(key) != l.Line {
			return key
		}
	}
	return "from"
}

// Direct: nothing of the link is in the substrate for a tunnel to deliver into.
func (Kind) Direct() bool { return false }

// Join has nothing to join: the substrate wires the link (Wire).
func (Kind) Join(ctx context.Context, env *kinds.Env, l *plan.Link, m kinds.Members) error {
	return nil
}

// Leave has nothing to undo: the pair goes with either end's namespace, or when a port
// takes the place of an end (kinds.Node.Port).
func (Kind) Leave(ctx context.Context, env *kinds.Env, l *plan.Link, m kinds.Members) error {
	return nil
}

// Wire makes the veth pair of link l between the namespaces ns (kinds.Wire). A pair whose two
// ends are each other's peer is kept, with its MTU set in place (same interfaces, with what
// the nodes' software set on them); an end left alone (its other node started anew, or an
// interrupted change) is deleted and the pair made anew.
func (Kind) Wire(ctx context.Context, env *kinds.Env, l *plan.Link, ns [2]netns.NsHandle, mtu int) (bool, error) {
	var h [2]*netlink.Handle
	for i := range ns {
		var err error
		if h[i], err = netlink.NewHandleAt(ns[i], unix.NETLINK_ROUTE); err != nil {
			return false, fmt.Errorf("netlink in node %s: %w", l.Ports[i].Node, err)
		}
		defer h[i].Close()
	}
	a, _ := h[0].LinkByName(l.Ports[0].Ifname)
	b, _ := h[1].LinkByName(l.Ports[1].Ifname)
	if paired(a, b) {
		for i, end := range []netlink.Link{a, b} {
			if end.Attrs().MTU != mtu {
				if err := h[i].LinkSetMTU(end, mtu); err != nil {
					return false, fmt.Errorf("interface %s: mtu %d: %w", l.Ports[i], mtu, err)
				}
			}
		}
		return false, enforce(l, ns)
	}
	for i, end := range []netlink.Link{a, b} {
		if end != nil && end.Type() == "veth" { // a stale end of this link (its peer went)
			if err := h[i].LinkDel(end); err != nil && !errors.Is(err, unix.ENODEV) {
				return false, fmt.Errorf("interface %s: deleting a stale end: %w", l.Ports[i], err)
			}
		}
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: l.Ports[0].Ifname, MTU: mtu, Namespace: netlink.NsFd(ns[0])},
		PeerName:      l.Ports[1].Ifname,
		PeerNamespace: netlink.NsFd(ns[1]),
	}
	if mac, err := net.ParseMAC(l.Ports[0].MAC); err == nil {
		veth.HardwareAddr = mac
	}
	if mac, err := net.ParseMAC(l.Ports[1].MAC); err == nil {
		veth.PeerHardwareAddr = mac
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return false, fmt.Errorf("veth pair %s -- %s: %w", l.Ports[0], l.Ports[1], err)
	}
	if enforced(l) {
		return true, enforce(l, ns)
	}
	return true, nil
}

// paired tells whether a and b are the two ends of one veth pair.
func paired(a, b netlink.Link) bool {
	return a != nil && b != nil && a.Type() == "veth" && b.Type() == "veth" &&
		a.Attrs().ParentIndex == b.Attrs().Index && b.Attrs().ParentIndex == a.Attrs().Index
}
