// Package lan is the link kind "lan": the eBPF LAN connector. A program on every member of the
// LAN (its ports on this machine and its tunnels to other machines) learns which member each
// MAC address is behind, in a forwarding table of the LAN's own (limited in size, with ageing),
// sends a frame to a learnt address to that member alone, and floods broadcast, multicast and
// unknown destinations to every other member by cloning; frames from a tunnel never go into
// another tunnel (split horizon). No bridge device, no bridge netfilter.
package lan

import (
	"context"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
)

// Name is the kind's name in topology files.
const Name = "lan"

func init() {
	kinds.RegisterLink(Name, Kind{}, spec.LinkKind{MinEndpoints: 2, MaxEndpoints: dataplane.MaxLANMembers, Settings: linkSettings})
}

// Kind is the LAN link kind.
type Kind struct{}

// Direct: frames from a tunnel enter the LAN through the tunnel device, where the LAN learns
// the addresses behind it.
func (Kind) Direct() bool { return false }

// Join puts the LAN program on every member, or updates it in place: the member list (a
// member made anew, added or gone), the table's size and ageing (the link's table and ageing;
// a new size starts the table anew), and how unicast frames reach a port (straight into the
// node on an uncapped link whose port is a veth, through the port's egress and shaper
// otherwise). What the LAN learnt
// stays, less the addresses of members that left or changed.
func (Kind) Join(ctx context.Context, env *kinds.Env, l *plan.Link, m kinds.Members) error {
	members := make([]dataplane.LANMember, 0, len(m.Ports)+len(m.Tunnels))
	for _, p := range m.Ports {
		// Only a veth whose peer is in a node's namespace has a peer to deliver into (a VM's
		// tap has none; the kernel redirects to a peer in the substrate's own namespace, a
		// VM's macvtap or bridge interconnect, not at all).
		members = append(members, dataplane.LANMember{Ifindex: p.Attrs().Index, Peer: l.Rate == 0 && p.Type() == "veth" && p.Attrs().NetNsID >= 0})
	}
	for _, t := range m.Tunnels {
		members = append(members, dataplane.LANMember{Ifindex: t.Attrs().Index, Tunnel: true})
	}
	s := settingsOf(l)
	return dataplane.AttachLAN(members, dataplane.LANOptions{MaxEntries: s.Table, Aging: s.Ageing})
}

// Leave takes the program off every member; the LAN's table goes with the last one.
func (Kind) Leave(ctx context.Context, env *kinds.Env, l *plan.Link, m kinds.Members) error {
	for _, dev := range append(append([]netlink.Link{}, m.Ports...), m.Tunnels...) {
		if err := dataplane.DetachForwarding(dev.Attrs().Index); err != nil {
			return err
		}
	}
	return nil
}
