package container

import (
	"context"
	"fmt"
	"net"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Port makes a veth pair for one virtual interface, its peer created directly inside the node
// (replacing the node's end of a direct link of that name: the link is re-plugged), then
// configures the interface: duplicate address detection off (addresses come from the
// topology, and detection would hold a router's IPv6 forwarding back for seconds) unless the
// file says otherwise, the file's sysctls for this interface, its addresses, and up. The port
// stays down: the substrate brings it up when the link's state says so.
func (Kind) Port(ctx context.Context, env *kinds.Env, in kinds.Instance, n *plan.Node, p plan.Port, mtu int) (netlink.Link, error) {
	if dev, err := netdev.ByName(p.Name); dev != nil || err != nil {
		return dev, err
	}
	ns, err := openNS(in.PID)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	if err := ns.unwire(p.Ifname); err != nil {
		return nil, err
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: p.Name, MTU: mtu},
		PeerName:      p.Ifname,
		PeerNamespace: netlink.NsFd(ns.ns),
	}
	if mac, err := net.ParseMAC(p.MAC); err == nil {
		veth.PeerHardwareAddr = mac
	}
	if err := netdev.Add(veth); err != nil {
		return nil, fmt.Errorf("port %s for %s: %w", p.Name, p, err)
	}
	if err := configure(ns, n, p, nil, true); err != nil {
		return nil, err
	}
	return netdev.ByName(p.Name)
}

// Netns opens the node's network namespace (kinds.Namespaced: the ends of direct links).
func (Kind) Netns(in kinds.Instance) (netns.NsHandle, error) {
	ns, err := netns.GetFromPid(in.PID)
	if err != nil {
		return ns, fmt.Errorf("node %s: network namespace: %w", in.Name, err)
	}
	return ns, nil
}

// unwire deletes the node's interface ifname if it is a veth, with its other end: where no
// port of that name is, it is the end of a direct link trellis made (a veth whose other end is
// a port goes with its port), and a port takes its place.
func (n *nodeNS) unwire(ifname string) error {
	link, err := n.nl.LinkByName(ifname)
	if err != nil || link.Type() != "veth" {
		return nil // none, or not trellis's: the port's making says so
	}
	if err := n.nl.LinkDel(link); err != nil && !netdev.IsGone(err) {
		return fmt.Errorf("interface %s: replacing the direct link's end: %w", ifname, err)
	}
	return nil
}

// Configure gives a node's virtual interface the port's addresses and removes those of
// placed (put there by trellis before) that the port no longer has; with whole, it also sets
// the interface's sysctls and brings it up (a port found after an interrupted change).
// Addresses trellis did not place (zebra's, a user's, the kernel's) stay.
func (Kind) Configure(ctx context.Context, env *kinds.Env, in kinds.Instance, n *plan.Node, p plan.Port, placed []string, whole bool) error {
	ns, err := openNS(in.PID)
	if err != nil {
		return err
	}
	defer ns.Close()
	return configure(ns, n, p, placed, whole)
}

// SetMTU sets the MTU of a node's virtual interface in place: the same interface, with what
// the node's software set on it (kinds.MTUSetter).
func (Kind) SetMTU(ctx context.Context, env *kinds.Env, in kinds.Instance, n *plan.Node, p plan.Port, mtu int) error {
	ns, err := openNS(in.PID)
	if err != nil {
		return err
	}
	defer ns.Close()
	link, err := ns.nl.LinkByName(p.Ifname)
	if err != nil {
		return fmt.Errorf("interface %s: %w", p.Ifname, err)
	}
	if link.Attrs().MTU == mtu {
		return nil
	}
	if err := ns.nl.LinkSetMTU(link, mtu); err != nil {
		return fmt.Errorf("interface %s: mtu %d: %w", p.Ifname, mtu, err)
	}
	return nil
}

// configure sets an interface's addresses: removes the addresses of placed that the port no
// longer has and adds its addresses. With whole (a new interface, or one an interrupted change
// may have left half configured) it first sets the interface's sysctls (duplicate address
// detection off, since addresses come from the topology and detection would hold a router's
// IPv6 forwarding back for seconds, unless the file says otherwise; then the file's sysctls
// for this interface), and at the end brings it up.
func configure(ns *nodeNS, n *plan.Node, p plan.Port, placed []string, whole bool) error {
	if whole {
		if err := ns.sysctl(n.IfaceSysctls(p.Ifname)); err != nil {
			return err
		}
	}
	link, err := ns.nl.LinkByName(p.Ifname)
	if err != nil {
		return fmt.Errorf("interface %s: %w", p.Ifname, err)
	}
	inNS := func(f func() error) error { return netnsutil.Do(ns.ns, f) }
	if err := netdev.RemoveStale(ns.nl, link, placed, p.Addresses, inNS); err != nil {
		return err
	}
	if err := ns.addAddresses(link, p.Addresses); err != nil {
		return err
	}
	if !whole {
		return nil
	}
	if err := ns.nl.LinkSetUp(link); err != nil {
		return fmt.Errorf("interface %s: %w", p.Ifname, err)
	}
	return nil
}

// addAddresses adds addresses to a node interface. IPv6 addresses skip duplicate address
// detection: they come from the topology file, which is where a duplicate would be fixed.
// An address the interface has already is left as it is.
func (n *nodeNS) addAddresses(link netlink.Link, addrs []string) error {
	ifname := link.Attrs().Name
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
		if err := n.nl.AddrReplace(link, addr); err != nil {
			return fmt.Errorf("interface %s: address %s: %w", ifname, a, err)
		}
	}
	return nil
}
