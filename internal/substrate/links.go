package substrate

import (
	"fmt"
	"net"
	"os"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// makeLink creates a virtual link: a veth per endpoint (the port in the substrate, the virtual
// interface in the node), joined by the link's connector, with its shaper.
func (b *build) makeLink(l *plan.Link) error {
	ports := make([]netlink.Link, len(l.Ports))
	for i, p := range l.Ports {
		port, err := b.makePort(p, l.MTU)
		if err != nil {
			return fmt.Errorf("link %s: %w", l.Name, err)
		}
		ports[i] = port
	}
	var err error
	switch l.Connector {
	case spec.Shortbridge:
		err = joinShortbridge(ports[0], ports[1], l.Rate)
	case spec.Bridge:
		err = joinBridge(l.Bridge, ports)
	}
	if err == nil {
		err = setShapers(ports, l.Rate)
	}
	if err != nil {
		return fmt.Errorf("link %s: %w", l.Name, err)
	}
	return nil
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
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+p.Name+"/disable_ipv6", []byte("1"), 0o644); err != nil {
		return nil, fmt.Errorf("port %s: %w", p.Name, err)
	}
	port, err := netlink.LinkByName(p.Name)
	if err == nil {
		err = netlink.LinkSetUp(port)
	}
	if err != nil {
		return nil, fmt.Errorf("port %s: %w", p.Name, err)
	}
	return port, nil
}

// joinShortbridge hands every frame of each port straight to the other. Without a rate cap the
// frame goes directly into the other node (redirect to the peer), skipping the other port;
// with one it goes out of the other port, through that port's shaper.
func joinShortbridge(a, b netlink.Link, rate uint64) error {
	direct := rate == 0
	if err := dataplane.AttachShortbridge(a.Attrs().Index, b.Attrs().Index, direct); err != nil {
		return err
	}
	return dataplane.AttachShortbridge(b.Attrs().Index, a.Attrs().Index, direct)
}

// joinBridge makes the LAN's bridge and enslaves its ports. The bridge has no address and no
// IPv6, so the substrate never takes part in the LAN's traffic.
func joinBridge(name string, ports []netlink.Link) error {
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("bridge %s: %w", name, err)
	}
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("bridge %s: %w", name, err)
	}
	for _, p := range ports {
		if err := netlink.LinkSetMaster(p, br); err != nil {
			return fmt.Errorf("bridge %s: adding %s: %w", name, p.Attrs().Name, err)
		}
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return fmt.Errorf("bridge %s: %w", name, err)
	}
	return nil
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
