package substrate

import (
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// makeLink creates a virtual link: a veth per local endpoint (the port in the substrate, the
// virtual interface in the node) and a tunnel device per other machine, joined by the link's
// connector, with their shapers.
func (b *build) makeLink(l *plan.Link) error {
	ports := make([]netlink.Link, len(l.Ports))
	for i, p := range l.Ports {
		port, err := b.makePort(p, l.MTU)
		if err != nil {
			return fmt.Errorf("link %s: %w", l.Name, err)
		}
		ports[i] = port
	}
	tunnels, err := b.makeTunnels(l, ports)
	if err != nil {
		return fmt.Errorf("link %s: %w", l.Name, err)
	}
	members := append(ports, tunnels...)
	switch l.Connector {
	case spec.Shortbridge:
		err = joinShortbridge(l, b.rec.Plan.Local, members[0], members[1])
	case spec.Bridge:
		err = joinBridge(l.Bridge, ports, tunnels)
	}
	if err == nil {
		err = setShapers(members, l.Rate)
	}
	if err != nil {
		return fmt.Errorf("link %s: %w", l.Name, err)
	}
	return nil
}

// members finds the devices of a link that is up: its ports and tunnel devices.
func members(l *plan.Link) ([]netlink.Link, error) {
	var names []string
	for _, p := range l.Ports {
		names = append(names, p.Name)
	}
	for i, t := range l.Tunnels {
		if i == 0 || t.Device != l.Tunnels[0].Device {
			names = append(names, t.Device)
		}
	}
	out := make([]netlink.Link, len(names))
	for i, name := range names {
		dev, err := netlink.LinkByName(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[i] = dev
	}
	return out, nil
}

// makePort creates the veth pair of one endpoint, its peer directly inside the node, and
// brings the port up. The port gets no IPv6 address: the substrate must not speak on it.
func (b *build) makePort(p plan.Port, mtu int) (netlink.Link, error) {
	ns := b.nodeNS(p.Node)
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: p.Name, MTU: mtu},
		PeerName:      p.Ifname,
		PeerNamespace: netlink.NsFd(ns.ns),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("port %s for %s:%s: %w", p.Name, p.Node, p.Ifname, err)
	}
	port, err := upQuiet(p.Name)
	if err != nil {
		return nil, fmt.Errorf("port %w", err)
	}
	return port, nil
}

// joinShortbridge hands every frame of each end of link l straight to the other. a is a node's
// port; b is another node's port or a tunnel device. A frame bound for a node on an uncapped
// link goes directly into that node (redirect to the veth peer), skipping the port; otherwise it
// goes out of the other end, through its shaper or into its tunnel. On an uncapped link to
// another machine over EGRE, a's own program encapsulates (local is this machine's underlay
// address), so the frame skips the tunnel port's veth pair, which only a capped link needs for
// its shaper.
func joinShortbridge(l *plan.Link, local netip.Addr, a, b netlink.Link) error {
	direct := func(to netlink.Link) bool { return l.Rate == 0 && plan.DeviceKind(to.Attrs().Name) == 'p' }
	if l.Rate == 0 && plan.DeviceKind(b.Attrs().Name) == 't' {
		if err := encapOnPort(l, local, a); err != nil {
			return err
		}
	} else if err := dataplane.AttachShortbridge(a.Attrs().Index, b.Attrs().Index, direct(b)); err != nil {
		return err
	}
	return dataplane.AttachShortbridge(b.Attrs().Index, a.Attrs().Index, direct(a))
}

// encapOnPort puts EGRE encapsulation of the link's tunnel on the tc ingress of port, in place of
// the shortbridge program (the two share a filter slot, so the swap is atomic).
func encapOnPort(l *plan.Link, local netip.Addr, port netlink.Link) error {
	underlay, err := underlayDevice(local)
	if err != nil {
		return err
	}
	t := l.Tunnels[0]
	return dataplane.AttachEncap(port.Attrs().Index, underlay.Attrs().Index, dataplane.Tunnel{Key: t.Key, Local: local, Remote: t.Remote})
}

// joinBridge makes the LAN's bridge and enslaves its ports and tunnel devices. The bridge has
// no address and no IPv6, so the substrate never takes part in the LAN's traffic. Tunnel
// devices are isolated from each other: what came from one machine is not sent on to another,
// which has its own tunnel from the sender (split horizon; no loops in a full mesh).
func joinBridge(name string, ports, tunnels []netlink.Link) error {
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("bridge %s: %w", name, err)
	}
	if _, err := upQuiet(name); err != nil {
		return fmt.Errorf("bridge %w", err)
	}
	for _, p := range append(ports, tunnels...) {
		if err := netlink.LinkSetMaster(p, br); err != nil {
			return fmt.Errorf("bridge %s: adding %s: %w", name, p.Attrs().Name, err)
		}
	}
	for _, t := range tunnels {
		if err := netlink.LinkSetIsolated(t, true); err != nil {
			return fmt.Errorf("bridge %s: isolating %s: %w", name, t.Attrs().Name, err)
		}
	}
	return nil
}

// upQuiet brings a substrate device up with IPv6 disabled, so that the substrate never speaks
// on a virtual link.
func upQuiet(name string) (netlink.Link, error) {
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0o644); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	dev, err := netlink.LinkByName(name)
	if err == nil {
		err = netlink.LinkSetUp(dev)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return dev, nil
}

// configureInterface brings a node's virtual interface up with its addresses.
func (n *nodeNS) configureInterface(ifname string, addrs []string) error {
	if err := n.addAddresses(ifname, addrs); err != nil {
		return err
	}
	link, err := n.nl.LinkByName(ifname)
	if err == nil {
		err = n.nl.LinkSetUp(link)
	}
	if err != nil {
		return fmt.Errorf("interface %s: %w", ifname, err)
	}
	return nil
}

// addAddresses adds addresses to a node interface. IPv6 addresses skip duplicate address
// detection: they come from the topology file, which is where a duplicate would be fixed.
func (n *nodeNS) addAddresses(ifname string, addrs []string) error {
	if len(addrs) == 0 {
		return nil
	}
	link, err := n.nl.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("interface %s: %w", ifname, err)
	}
	for _, a := range addrs {
		ip, ipnet, err := net.ParseCIDR(a)
		if err != nil {
			return fmt.Errorf("interface %s: %w", ifname, err)
		}
		ipnet.IP = ip
		addr := &netlink.Addr{IPNet: ipnet}
		if ip.To4() == nil {
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := n.nl.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("interface %s: address %s: %w", ifname, a, err)
		}
	}
	return nil
}
