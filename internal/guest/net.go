package guest

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// configure finds the NIC with iface.MAC, names it, sets its MTU, sysctls and exactly its
// addresses, and brings it up.
func configure(iface *Iface) error {
	mac, err := net.ParseMAC(iface.MAC)
	if err != nil {
		return err
	}
	link, err := byMAC(mac)
	if err != nil {
		return err
	}
	if link.Attrs().Name != iface.Name {
		if err := netlink.LinkSetDown(link); err != nil {
			return err
		}
		if err := netlink.LinkSetName(link, iface.Name); err != nil {
			return fmt.Errorf("naming %s %s: %w", iface.MAC, iface.Name, err)
		}
	}
	if iface.MTU > 0 && link.Attrs().MTU != iface.MTU {
		if err := netlink.LinkSetMTU(link, iface.MTU); err != nil {
			return err
		}
	}
	if err := sysctl(iface.Sysctl); err != nil {
		return err
	}
	if err := setAddresses(link, iface.Addresses); err != nil {
		return err
	}
	return netlink.LinkSetUp(link)
}

func byMAC(mac net.HardwareAddr) (netlink.Link, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		if l.Attrs().HardwareAddr.String() == mac.String() {
			return l, nil
		}
	}
	return nil, fmt.Errorf("no interface with MAC %s", mac)
}

// setLoopback brings lo up with addrs besides its own.
func setLoopback(addrs []string) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return err
	}
	for _, a := range addrs {
		addr, err := netlink.ParseAddr(a)
		if err != nil {
			return err
		}
		if err := netlink.AddrReplace(lo, addr); err != nil {
			return fmt.Errorf("lo %s: %w", a, err)
		}
	}
	return nil
}

// setAddresses makes link's addresses exactly want, leaving IPv6 link-local ones.
func setAddresses(link netlink.Link, want []string) error {
	have, err := netlink.AddrList(link, unix.AF_UNSPEC)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, a := range want {
		addr, err := netlink.ParseAddr(a)
		if err != nil {
			return err
		}
		keep[addr.IPNet.String()] = true
		if err := netlink.AddrReplace(link, addr); err != nil {
			return fmt.Errorf("%s %s: %w", link.Attrs().Name, a, err)
		}
	}
	for _, a := range have {
		if a.IP.IsLinkLocalUnicast() || keep[a.IPNet.String()] {
			continue
		}
		if err := netlink.AddrDel(link, &a); err != nil {
			return err
		}
	}
	return nil
}
