// Package vxlan is the tunnel kind "vxlan": the kernel's VXLAN device, one per link, with a
// default forwarding entry per other machine (head-end replication of broadcasts). The kernel
// takes a VXLAN packet from any source; the machine's decapsulation program (egre's, on the
// underlay device) lets a link's packets through only from the machines of its tunnels.
package vxlan

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/kinds/egre"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Name is the kind's name in topology files.
const Name = "vxlan"

// Overhead is what VXLAN adds on the underlay: inner Ethernet, outer IPv4, UDP and VXLAN headers.
const Overhead = 14 + 20 + 8 + 8

// Port is the IANA port of VXLAN, as Linux `ip link add type vxlan dstport 4789` uses.
const Port = dataplane.VXLANPort

func init() { kinds.RegisterTunnel(Name, Kind{}, spec.TunnelKind{Overhead: Overhead}) }

// Kind is the VXLAN tunnel kind.
type Kind struct{}

// Devices: one VXLAN device carries a link to all its other machines, with a forwarding entry
// for each; no encapsulation port (plan.TunnelDevices).
func (Kind) Devices(link, _ string) (device, encap string) { return "tunnel/" + link, "" }

// Ensure makes the link's VXLAN device (all its tunnels name the same one) if it is missing, and
// gives it a forwarding entry for every machine of the link, and lets the link's packets in from
// those machines only.
func (Kind) Ensure(ctx context.Context, env *kinds.Env, l *plan.Link, ports []netlink.Link, direct bool) (kinds.Members, error) {
	t := l.Tunnels[0]
	dev, err := netdev.ByName(t.Device)
	if err != nil {
		return kinds.Members{}, err
	}
	if dev == nil {
		if err := create(env.Plan, l); err != nil {
			return kinds.Members{}, err
		}
	} else if err := netdev.SetMTU(l.MTU, t.Device); err != nil { // the link's MTU changed
		return kinds.Members{}, fmt.Errorf("VXLAN device: %w", err)
	}
	if err := guard(env, l.Tunnels, true); err != nil {
		return kinds.Members{}, err
	}
	if dev, err = netdev.UpQuiet(t.Device); err != nil {
		return kinds.Members{}, err
	}
	for _, tt := range l.Tunnels {
		fdb := &netlink.Neigh{LinkIndex: dev.Attrs().Index, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF,
			State: netlink.NUD_PERMANENT | netlink.NUD_NOARP, HardwareAddr: make(net.HardwareAddr, 6), IP: net.IP(tt.Remote.AsSlice())}
		if err := netlink.NeighAppend(fdb); err != nil && !errors.Is(err, unix.EEXIST) {
			return kinds.Members{}, fmt.Errorf("VXLAN device %s: forwarding entry to %s: %w", t.Device, tt.Host, err)
		}
	}
	return kinds.Members{Tunnels: []netlink.Link{dev}}, nil
}

func create(p *plan.Plan, l *plan.Link) error {
	t := l.Tunnels[0]
	underlay, err := netdev.Underlay(p.Local)
	if err != nil {
		return err
	}
	vx := &netlink.Vxlan{
		LinkAttrs:    netlink.LinkAttrs{Name: t.Device, MTU: l.MTU},
		VxlanId:      int(t.Key & 0xffffff),
		VtepDevIndex: underlay.Attrs().Index,
		SrcAddr:      net.IP(p.Local.AsSlice()),
		Port:         Port,
		Learning:     true,
	}
	if err := netlink.LinkAdd(vx); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("VXLAN device %s: VNI %d is already used on this machine (by another network?); rename the link", t.Device, vx.VxlanId)
		}
		return fmt.Errorf("VXLAN device %s: %w", t.Device, err)
	}
	return nil
}

// guard adds (or removes) the link's machines as the peers its VNI's packets may come from, in
// the machine's decapsulation program.
func guard(env *kinds.Env, tunnels []plan.Tunnel, add bool) error {
	underlay, err := netdev.Underlay(env.Plan.Local)
	if err != nil {
		if add {
			return err
		}
		return nil // the underlay is gone, and the program with it
	}
	return egre.WithDecap(env, underlay, add, func(d *dataplane.Decap) error {
		for _, t := range tunnels {
			vni := t.Key & 0xffffff
			if add {
				if err := d.AddVXLAN(Port, vni, t.Remote); err != nil {
					return fmt.Errorf("VXLAN device %s: %w", t.Device, err)
				}
			} else if err := d.DeleteVXLAN(Port, vni, t.Remote); err != nil {
				return err
			}
		}
		return nil
	})
}

// Remove deletes the link's VXLAN device and its peers.
func (Kind) Remove(ctx context.Context, env *kinds.Env, l *plan.Link) error {
	if len(l.Tunnels) == 0 {
		return nil
	}
	if err := netdev.Delete(l.Tunnels[0].Device); err != nil {
		return err
	}
	return guard(env, l.Tunnels, false)
}

// Counters reads the machine's decapsulation counters (VXLANRefused among them), or nil if it
// has no program.
func (Kind) Counters(env *kinds.Env) *dataplane.EGRECounters { return egre.Kind{}.Counters(env) }
