package setup

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The bench's own namespaces (source, sink and node under test of the setups without trellis)
// are anonymous (netnsutil.New): no bind mount under /run/netns, no process. They live exactly
// as long as the bench holds their handle, so a bench that dies leaves none behind, and with
// them go their veths, which never have an end in the root namespace.

// nsLink is one interface inside a namespace, with a netlink handle there.
type nsLink struct {
	ns   netns.NsHandle
	nl   *netlink.Handle
	name string
}

func openLink(ns netns.NsHandle, name string) (*nsLink, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, err
	}
	return &nsLink{ns: ns, nl: h, name: name}, nil
}

func (l *nsLink) Close() { l.nl.Close() }

func (l *nsLink) link() (netlink.Link, error) {
	lk, err := l.nl.LinkByName(l.name)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", l.name, err)
	}
	return lk, nil
}

func (l *nsLink) index() (int, error) {
	lk, err := l.link()
	if err != nil {
		return 0, err
	}
	return lk.Attrs().Index, nil
}

func (l *nsLink) mac() (net.HardwareAddr, error) {
	lk, err := l.link()
	if err != nil {
		return nil, err
	}
	return lk.Attrs().HardwareAddr, nil
}

// neigh adds a permanent neighbour entry: the sinks drop everything, ARP included.
func (l *nsLink) neigh(ip net.IP, mac net.HardwareAddr) error {
	idx, err := l.index()
	if err != nil {
		return err
	}
	return l.nl.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT, IP: ip, HardwareAddr: mac})
}

// vethBetween makes a veth pair with one end (nameA) in namespace a and the other (nameB) in b;
// neither end ever exists in the root namespace.
func vethBetween(a netns.NsHandle, nameA string, b netns.NsHandle, nameB string) error {
	v := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: nameA, Namespace: netlink.NsFd(a)},
		PeerName:      nameB,
		PeerNamespace: netlink.NsFd(b),
	}
	if err := netlink.LinkAdd(v); err != nil {
		return fmt.Errorf("veth %s-%s: %w", nameA, nameB, err)
	}
	return nil
}

// upWithAddr brings an interface (and lo) of a namespace up, with an IPv4 address if given.
func upWithAddr(ns netns.NsHandle, name, cidr string) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	for _, n := range []string{"lo", name} {
		lk, err := h.LinkByName(n)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		if n == name && cidr != "" {
			addr, err := netlink.ParseAddr(cidr)
			if err != nil {
				return err
			}
			if err := h.AddrAdd(lk, addr); err != nil {
				return fmt.Errorf("%s: address %s: %w", n, cidr, err)
			}
		}
		if err := h.LinkSetUp(lk); err != nil {
			return fmt.Errorf("%s up: %w", n, err)
		}
	}
	return nil
}

// AddRoute adds an IPv4 route to dst (CIDR) via a gateway in namespace ns.
func AddRoute(ns netns.NsHandle, dst string, via net.IP) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	_, d, err := net.ParseCIDR(dst)
	if err != nil {
		return err
	}
	if err := h.RouteAdd(&netlink.Route{Dst: d, Gw: via}); err != nil {
		return fmt.Errorf("route to %s: %w", dst, err)
	}
	return nil
}
