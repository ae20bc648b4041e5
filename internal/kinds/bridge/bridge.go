// Package bridge is the link kind "bridge": a LAN joined by a Linux bridge in the substrate,
// which learns addresses and floods broadcasts, so ARP, neighbour discovery and non-IP frames
// reach every member.
package bridge

import (
	"context"
	"fmt"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
)

// Name is the kind's name in topology files.
const Name = "bridge"

func init() { kinds.RegisterLink(Name, Kind{}, spec.LinkKind{MinEndpoints: 2}) }

// Kind is the bridge link kind.
type Kind struct{}

// Direct: frames from a tunnel enter the bridge, which decides where they go.
func (Kind) Direct() bool { return false }

// Join makes the LAN's bridge (the link's Device) and enslaves its ports and tunnel devices.
// The bridge has no address and no IPv6, so the substrate never takes part in the LAN's
// traffic. Tunnel devices are isolated from each other: what came from one machine is not sent
// on to another, which has its own tunnel from the sender (split horizon; no loops in a full
// mesh). Members already enslaved are left as they are.
func (Kind) Join(ctx context.Context, env *kinds.Env, l *plan.Link, m kinds.Members) error {
	br, err := netdev.ByName(l.Device)
	if err != nil {
		return err
	}
	if br == nil {
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: l.Device}}); err != nil {
			return fmt.Errorf("bridge %s: %w", l.Device, err)
		}
	}
	if br, err = netdev.UpQuiet(l.Device); err != nil {
		return fmt.Errorf("bridge %w", err)
	}
	for _, p := range append(append([]netlink.Link{}, m.Ports...), m.Tunnels...) {
		if p.Attrs().MasterIndex == br.Attrs().Index {
			continue
		}
		if err := netlink.LinkSetMaster(p, br); err != nil {
			return fmt.Errorf("bridge %s: adding %s: %w", l.Device, p.Attrs().Name, err)
		}
	}
	for _, t := range m.Tunnels {
		if err := netlink.LinkSetIsolated(t, true); err != nil {
			return fmt.Errorf("bridge %s: isolating %s: %w", l.Device, t.Attrs().Name, err)
		}
	}
	return nil
}

// Leave deletes the bridge; its members leave it with it.
func (Kind) Leave(ctx context.Context, env *kinds.Env, l *plan.Link, m kinds.Members) error {
	return netdev.Delete(l.Device)
}
