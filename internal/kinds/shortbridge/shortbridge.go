// Package shortbridge is the link kind "shortbridge": the connector of a point-to-point link,
// an eBPF program on each of its two ends that hands every frame straight to the other end
// (docs/design.md, decision 5), with no table and no lookup.
package shortbridge

import (
	"context"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
)

// Name is the kind's name in topology files.
const Name = "shortbridge"

func init() {
	kinds.RegisterLink(Name, Kind{}, spec.LinkKind{MinEndpoints: 2, MaxEndpoints: 2})
}

// Kind is the shortbridge link kind.
type Kind struct{}

// Direct: a shortbridge has one local port per tunnel, which a tunnel may deliver into.
func (Kind) Direct() bool { return true }

// Join puts the program on both ends. A frame bound for a container on an uncapped link goes
// directly into that node (redirect to the veth peer), skipping the port; otherwise it goes
// out of the other end, through its shaper or into its tunnel. On an uncapped link to another
// machine whose tunnel kind can encapsulate on the port, the port's own program encapsulates,
// so the frame skips the tunnel device, which only a capped link needs for its shaper.
// Attaching replaces the program in place, so Join again is an update.
func (Kind) Join(ctx context.Context, env *kinds.Env, l *plan.Link, m kinds.Members) error {
	ends := append(append([]netlink.Link{}, m.Ports...), m.Tunnels...)
	a, b := ends[0], ends[1]
	bIsPort := len(m.Ports) == 2
	// A port whose node has engines is entered through its egress, where their classifier is.
	peerA := l.Rate == 0 && !classified(l, 0) && hasPeer(a)
	peerB := l.Rate == 0 && bIsPort && !classified(l, 1) && hasPeer(b)
	if l.Rate == 0 && !bIsPort && m.EncapOnPort != nil {
		if err := m.EncapOnPort(a); err != nil {
			return err
		}
	} else if err := dataplane.AttachShortbridge(env.Dataplane, a.Attrs().Index, b.Attrs().Index, peerB); err != nil {
		return err
	}
	return dataplane.AttachShortbridge(env.Dataplane, b.Attrs().Index, a.Attrs().Index, peerA)
}

// classified tells whether the link's port i has a classifier on its egress (its node has
// forwarding engines).
func classified(l *plan.Link, i int) bool {
	return i < len(l.Ports) && l.Ports[i].Classify
}

// hasPeer tells whether a frame can be handed straight to the node behind a port: a veth's
// peer in the node's namespace takes it; a VM's tap must transmit it to QEMU, and a veth whose
// peer stays in the substrate's namespace (a VM's macvtap or bridge interconnect) must
// transmit it to that peer (the kernel redirects to a peer only across namespaces).
func hasPeer(port netlink.Link) bool { return port.Type() == "veth" && port.Attrs().NetNsID >= 0 }

// Leave takes the programs off both ends.
func (Kind) Leave(ctx context.Context, env *kinds.Env, l *plan.Link, m kinds.Members) error {
	for _, dev := range append(append([]netlink.Link{}, m.Ports...), m.Tunnels...) {
		if err := dataplane.DetachForwarding(dev.Attrs().Index); err != nil {
			return err
		}
	}
	return nil
}
