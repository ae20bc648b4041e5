// Package egre is the tunnel kind "egre": Ethernet in keyed GRE over IPv4, the wire format of
// Linux gretap, encapsulated and decapsulated by eBPF programs in the substrate (docs/design.md,
// decision 6). Each tunnel of a link has a tunnel port, a veth pair in the substrate: one end
// joins the link's connector, the other encapsulates what crosses to it. One decapsulation
// program per machine hands arriving frames to their link by key.
package egre

import (
	"context"
	"errors"
	"fmt"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
)

// Name is the kind's name in topology files.
const Name = "egre"

// Overhead is what EGRE adds to a frame on the underlay: the inner Ethernet header, the
// outer IPv4 header and GRE with a key.
const Overhead = 14 + 20 + 8

func init() { kinds.RegisterTunnel(Name, Kind{}, spec.TunnelKind{Overhead: Overhead}) }

// Kind is the EGRE tunnel kind.
type Kind struct{}

// Devices: a tunnel port per link and machine, and its encapsulation port (plan.TunnelDevices).
func (Kind) Devices(link, host string) (device, encap string) {
	id := "tunnel/" + link + "/" + host
	return id, id
}

// Ensure makes the link's tunnel ports, encapsulation on each, its entries in the machine's
// decapsulation program (made with the machine's first tunnel), and primes the neighbour entry
// of each remote machine. Decapsulated frames of a direct connector go straight to its port
// (IP frames into the node itself); others cross the tunnel port's veth into the connector.
func (Kind) Ensure(ctx context.Context, env *kinds.Env, l *plan.Link, ports []netlink.Link, direct bool) (kinds.Members, error) {
	p := env.Plan
	var m kinds.Members
	underlay, err := netdev.Underlay(p.Local)
	if err != nil {
		return m, err
	}
	for _, t := range l.Tunnels {
		dev, encap, err := tunnelPort(t, l.MTU)
		if err != nil {
			return m, err
		}
		tun := dataplane.Tunnel{Key: t.Key, Local: p.Local, Remote: t.Remote}
		if err := dataplane.AttachEncap(env.Dataplane, encap.Attrs().Index, underlay.Attrs().Index, tun); err != nil {
			return m, err
		}
		target := encap
		if direct {
			target = ports[0]
		}
		// Into the port's veth peer only when no engines' classifier waits on its egress.
		if err := addDecap(env, underlay, t, target.Attrs().Index, direct && !(len(l.Ports) > 0 && l.Ports[0].Classify)); err != nil {
			return m, err
		}
		if err := dataplane.PrimeNeighbour(underlay.Attrs().Index, t.Remote); err != nil {
			return m, err
		}
		m.Tunnels = append(m.Tunnels, dev)
	}
	if len(l.Tunnels) == 1 {
		t := l.Tunnels[0]
		m.EncapOnPort = func(port netlink.Link) error {
			return dataplane.AttachEncap(env.Dataplane, port.Attrs().Index, underlay.Attrs().Index, dataplane.Tunnel{Key: t.Key, Local: p.Local, Remote: t.Remote})
		}
	}
	return m, nil
}

// tunnelPort makes (or finds) a tunnel port's veth pair with the link's MTU (set in place on
// both ends of a pair found with another: the link's MTU changed) and brings both ends up.
func tunnelPort(t plan.Tunnel, mtu int) (dev, encap netlink.Link, err error) {
	if dev, err = netdev.ByName(t.Device); err != nil {
		return nil, nil, err
	}
	if dev == nil {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: t.Device, MTU: mtu}, PeerName: t.Encap}
		if err := netlink.LinkAdd(veth); err != nil {
			return nil, nil, fmt.Errorf("tunnel port %s to %s: %w", t.Device, t.Host, err)
		}
	} else if err := netdev.SetMTU(mtu, t.Device, t.Encap); err != nil {
		return nil, nil, fmt.Errorf("tunnel port to %s: %w", t.Host, err)
	}
	if dev, err = netdev.UpQuiet(t.Device); err != nil {
		return nil, nil, err
	}
	if encap, err = netdev.UpQuiet(t.Encap); err != nil {
		return nil, nil, err
	}
	return dev, encap, nil
}

// addDecap registers a tunnel with the machine's decapsulation program. An entry for the same
// key and remote that leads to a device that no longer exists, or to one of this network's, is
// stale (a port made anew) and is replaced; one that leads to another network's device means
// two networks derived the same key.
func addDecap(env *kinds.Env, underlay netlink.Link, t plan.Tunnel, target int, intoPeer bool) error {
	return WithDecap(env, underlay, true, func(d *dataplane.Decap) error {
		old, ok, err := d.Target(t.Key, t.Remote)
		if err != nil {
			return err
		}
		if ok && old != target {
			dev, err := netlink.LinkByIndex(old)
			if err == nil && plan.DeviceNetID(dev.Attrs().Name) != env.Plan.NetID {
				return fmt.Errorf("tunnel key %#x from %s is used by %s, of another network (does another network use this link name?)", t.Key, t.Host, dev.Attrs().Name)
			}
			if err := d.Delete(t.Key, t.Remote); err != nil {
				return err
			}
		}
		if err := d.Add(t.Key, t.Remote, target, intoPeer); err != nil {
			return fmt.Errorf("tunnel key %#x from %s: %w", t.Key, t.Host, err)
		}
		return nil
	})
}

// WithDecap runs fn on the decapsulation program of the machine's underlay device (which also
// vets the VXLAN tunnel kind's packets), holding the machine's lock. With add, it attaches the
// program if it is not there; without, a missing program is not an error (fn does not run)
// and the program is detached once it serves no tunnel any more.
func WithDecap(env *kinds.Env, underlay netlink.Link, add bool, fn func(*dataplane.Decap) error) error {
	unlock, err := env.Store.LockMachine()
	if err != nil {
		return err
	}
	defer unlock()
	d, err := dataplane.OpenDecap(underlay.Attrs().Index, env.Plan.Local, add)
	if !add && errors.Is(err, dataplane.ErrNoDecap) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if err := fn(d); err != nil || add {
		return err
	}
	if n, err := d.Len(); err != nil || n > 0 {
		return err
	}
	return d.Detach()
}

// Remove unregisters the link's tunnels from the machine's decapsulation program, detaching
// the program when no tunnel is left, and deletes the tunnel ports.
func (Kind) Remove(ctx context.Context, env *kinds.Env, l *plan.Link) error {
	if err := removeDecap(env, l.Tunnels); err != nil {
		return err
	}
	for _, t := range l.Tunnels {
		if err := netdev.Delete(t.Device); err != nil { // its peer goes with it
			return err
		}
	}
	return nil
}

func removeDecap(env *kinds.Env, tunnels []plan.Tunnel) error {
	underlay, err := netdev.Underlay(env.Plan.Local)
	if err != nil {
		return nil // the underlay is gone, and the program with it
	}
	return WithDecap(env, underlay, false, func(d *dataplane.Decap) error {
		for _, t := range tunnels {
			// An interrupted `up` may not have registered every tunnel.
			if err := d.Delete(t.Key, t.Remote); err != nil && !errors.Is(err, dataplane.ErrNoTunnel) {
				return err
			}
		}
		return nil
	})
}

// Counters reads the machine's decapsulation counters, or nil if it has no program.
func (Kind) Counters(env *kinds.Env) *dataplane.EGRECounters {
	underlay, err := netdev.Underlay(env.Plan.Local)
	if err != nil {
		return nil
	}
	d, err := dataplane.OpenDecap(underlay.Attrs().Index, env.Plan.Local, false)
	if err != nil {
		return nil
	}
	defer d.Close()
	c, err := d.Counters()
	if err != nil {
		return nil
	}
	return &c
}
