package guest

import (
	"fmt"
	"net"
	"time"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/netdev"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// configure finds the NIC with iface.MAC, names it, sets its MTU, sysctls and addresses
// (removing those trellis placed before that it no longer lists), and brings it up; with
// iface.AddressesOnly, it sets its addresses only.
func configure(iface *Iface) error {
	mac, err := net.ParseMAC(iface.MAC)
	if err != nil {
		return err
	}
	link, err := byMAC(mac)
	if err != nil {
		return err
	}
	if iface.AddressesOnly {
		return setAddresses(link, iface.Addresses, iface.Placed)
	}
	if link.Attrs().Name != iface.Name {
		if err := rename(link, iface.Name); err != nil {
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
	if err := setAddresses(link, iface.Addresses, iface.Placed); err != nil {
		return err
	}
	return netlink.LinkSetUp(link)
}

// rename names link name; a NIC that has the name (the kernel names NICs eth0, eth1, ... in
// the order it finds them) is first given a temporary one, until it is configured in turn.
func rename(link netlink.Link, name string) error {
	if other, err := netlink.LinkByName(name); err == nil {
		if err := netlink.LinkSetDown(other); err != nil {
			return err
		}
		if err := netlink.LinkSetName(other, fmt.Sprintf("tmp%d", other.Attrs().Index)); err != nil {
			return err
		}
	}
	if err := netlink.LinkSetDown(link); err != nil {
		return err
	}
	return netlink.LinkSetName(link, name)
}

// byMAC finds the NIC with mac, waiting for one just hot-plugged to show up.
func byMAC(mac net.HardwareAddr) (netlink.Link, error) {
	deadline := time.Now().Add(hotplugWait)
	for {
		links, err := netdev.Dump(netlink.LinkList)
		if err != nil {
			return nil, err
		}
		for _, l := range links {
			if l.Attrs().HardwareAddr.String() == mac.String() {
				return l, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no interface with MAC %s after %s", mac, hotplugWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hotplugWait bounds how long a hot-plugged NIC may take to appear (slow under emulation).
const hotplugWait = 60 * time.Second

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

// setAddresses adds want to link and removes the addresses of placed that want no longer
// lists; every other address of link (the guest's software's, the kernel's) stays.
func setAddresses(link netlink.Link, want, placed []string) error {
	for _, a := range want {
		addr, err := netlink.ParseAddr(a)
		if err != nil {
			return err
		}
		if err := netlink.AddrReplace(link, addr); err != nil {
			return fmt.Errorf("%s %s: %w", link.Attrs().Name, a, err)
		}
	}
	return netdev.RemoveStale(&netlink.Handle{}, link, placed, want, func(f func() error) error { return f() })
}

// links lists the guest's interfaces with their addresses and counters.
func links() ([]kinds.Interface, error) {
	all, err := netdev.Dump(netlink.LinkList)
	if err != nil {
		return nil, err
	}
	out := make([]kinds.Interface, 0, len(all))
	for _, l := range all {
		in := kinds.Interface{LinkAttrs: *l.Attrs()}
		if have, err := addrs(l); err == nil {
			for _, a := range have {
				in.Addresses = append(in.Addresses, a.IPNet.String())
			}
		}
		out = append(out, in)
	}
	return out, nil
}

// addrs lists link's addresses of every family, through interrupted dumps.
func addrs(link netlink.Link) ([]netlink.Addr, error) {
	return netdev.Dump(func() ([]netlink.Addr, error) { return netlink.AddrList(link, unix.AF_UNSPEC) })
}
