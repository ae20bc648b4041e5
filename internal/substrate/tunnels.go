package substrate

import (
	"errors"
	"fmt"
	"net"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// vxlanPort is the IANA port of VXLAN, as Linux `ip link add type vxlan dstport 4789` uses.
const vxlanPort = 4789

// makeTunnels creates the devices that carry link l to other machines and returns those that
// join the link's connector. ports are the link's local ports, already made.
func (b *build) makeTunnels(l *plan.Link, ports []netlink.Link) ([]netlink.Link, error) {
	if len(l.Tunnels) == 0 {
		return nil, nil
	}
	underlay, err := underlayDevice(b.rec.Plan.Local)
	if err != nil {
		return nil, err
	}
	if b.rec.Plan.Tunnel == spec.VXLAN {
		dev, err := makeVXLAN(l, underlay, b.rec.Plan)
		if err != nil {
			return nil, err
		}
		return []netlink.Link{dev}, nil
	}
	var devs []netlink.Link
	for _, t := range l.Tunnels {
		dev, encap, err := makeTunnelPort(t, l.MTU)
		if err != nil {
			return nil, err
		}
		tun := dataplane.Tunnel{Key: t.Key, Local: b.rec.Plan.Local, Remote: t.Remote}
		if err := dataplane.AttachEncap(encap.Attrs().Index, underlay.Attrs().Index, tun); err != nil {
			return nil, err
		}
		// Decapsulated frames of a point-to-point link go straight to the node's port (IP
		// frames into the node itself); those of a LAN cross the tunnel port's veth into the
		// bridge.
		target, intoPeer := encap, false
		if l.Connector == spec.Shortbridge {
			target, intoPeer = ports[0], true
		}
		if err := b.addDecap(underlay, t, target.Attrs().Index, intoPeer); err != nil {
			return nil, err
		}
		if err := dataplane.PrimeNeighbour(underlay.Attrs().Index, t.Remote); err != nil {
			return nil, err
		}
		devs = append(devs, dev)
	}
	return devs, nil
}

// makeTunnelPort creates an EGRE tunnel port: a veth pair in the substrate, one end joined to
// the link's connector, the other encapsulating what crosses to it.
func makeTunnelPort(t plan.Tunnel, mtu int) (dev, encap netlink.Link, err error) {
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: t.Device, MTU: mtu}, PeerName: t.Encap}
	if err := netlink.LinkAdd(veth); err != nil {
		return nil, nil, fmt.Errorf("tunnel port %s to %s: %w", t.Device, t.Host, err)
	}
	if dev, err = upQuiet(t.Device); err != nil {
		return nil, nil, err
	}
	if encap, err = upQuiet(t.Encap); err != nil {
		return nil, nil, err
	}
	return dev, encap, nil
}

// makeVXLAN creates the link's VXLAN device, with one default forwarding entry per other
// machine so that broadcast and unknown unicast reach them all (head-end replication).
func makeVXLAN(l *plan.Link, underlay netlink.Link, p *plan.Plan) (netlink.Link, error) {
	t := l.Tunnels[0]
	vx := &netlink.Vxlan{
		LinkAttrs:    netlink.LinkAttrs{Name: t.Device, MTU: l.MTU},
		VxlanId:      int(t.Key & 0xffffff),
		VtepDevIndex: underlay.Attrs().Index,
		SrcAddr:      net.IP(p.Local.AsSlice()),
		Port:         vxlanPort,
		Learning:     true,
	}
	if err := netlink.LinkAdd(vx); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("VXLAN device %s: VNI %d is already used on this machine (by another network?); rename the link", t.Device, vx.VxlanId)
		}
		return nil, fmt.Errorf("VXLAN device %s: %w", t.Device, err)
	}
	dev, err := upQuiet(t.Device)
	if err != nil {
		return nil, err
	}
	for _, tt := range l.Tunnels {
		fdb := &netlink.Neigh{LinkIndex: dev.Attrs().Index, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF,
			State: netlink.NUD_PERMANENT | netlink.NUD_NOARP, HardwareAddr: make(net.HardwareAddr, 6), IP: net.IP(tt.Remote.AsSlice())}
		if err := netlink.NeighAppend(fdb); err != nil {
			return nil, fmt.Errorf("VXLAN device %s: forwarding entry to %s: %w", t.Device, tt.Host, err)
		}
	}
	return dev, nil
}

// addDecap registers a tunnel with the machine's EGRE decapsulation program, attaching the
// program if this is the machine's first tunnel.
func (b *build) addDecap(underlay netlink.Link, t plan.Tunnel, target int, intoPeer bool) error {
	unlock, err := b.st.LockMachine()
	if err != nil {
		return err
	}
	defer unlock()
	d, err := dataplane.OpenDecap(underlay.Attrs().Index, b.rec.Plan.Local, true)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Add(t.Key, t.Remote, target, intoPeer); err != nil {
		return fmt.Errorf("tunnel key %#x from %s: %w (does another network use this link name?)", t.Key, t.Host, err)
	}
	return nil
}

// removeDecap unregisters a network's tunnels from the machine's decapsulation program, and
// detaches the program when no tunnel is left.
func removeDecap(st *state.Store, p *plan.Plan) error {
	if p.Tunnel != spec.EGRE {
		return nil
	}
	underlay, err := underlayDevice(p.Local)
	if err != nil {
		return nil // the underlay is gone, and the program with it
	}
	unlock, err := st.LockMachine()
	if err != nil {
		return err
	}
	defer unlock()
	d, err := dataplane.OpenDecap(underlay.Attrs().Index, p.Local, false)
	if errors.Is(err, dataplane.ErrNoDecap) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	for _, l := range p.Links {
		for _, t := range l.Tunnels {
			// An interrupted `up` may not have registered every tunnel.
			if err := d.Delete(t.Key, t.Remote); err != nil && !errors.Is(err, dataplane.ErrNoTunnel) {
				return err
			}
		}
	}
	if n, err := d.Len(); err != nil || n > 0 {
		return err
	}
	return d.Detach()
}

// egreCounters reads the machine's EGRE decapsulation counters, or nil if p has no EGRE tunnels.
func egreCounters(p *plan.Plan) *dataplane.EGRECounters {
	if p.Tunnel != spec.EGRE {
		return nil
	}
	underlay, err := underlayDevice(p.Local)
	if err != nil {
		return nil
	}
	d, err := dataplane.OpenDecap(underlay.Attrs().Index, p.Local, false)
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
