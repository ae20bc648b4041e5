// Package netdev holds the few device operations that several kinds share: bringing a
// substrate device up without letting the substrate speak on it, finding the underlay device,
// listing devices through interrupted dumps, and telling "already gone" from real failures.
package netdev

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"

	"github.com/vishvananda/netlink"
)

// UpQuiet brings a substrate device up with IPv6 disabled, so that the substrate never speaks
// on a virtual link.
func UpQuiet(name string) (netlink.Link, error) {
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0o644); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	dev, err := netlink.LinkByName(name)
	if err == nil && dev.Attrs().Flags&1 == 0 { // net.FlagUp
		err = netlink.LinkSetUp(dev)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return dev, nil
}

// Underlay finds the device that holds the underlay address addr.
func Underlay(addr netip.Addr) (netlink.Link, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok && ip == addr {
			return netlink.LinkByIndex(a.LinkIndex)
		}
	}
	return nil, fmt.Errorf("no device on this machine has the underlay address %s", addr)
}

// List lists the devices of the calling thread's namespace, listing again when the kernel
// interrupts the dump because devices changed during it.
func List() ([]netlink.Link, error) {
	links, err := netlink.LinkList()
	for try := 0; errors.Is(err, netlink.ErrDumpInterrupted) && try < 50; try++ {
		links, err = netlink.LinkList()
	}
	return links, err
}

// ByName returns the device called name, or nil if there is none.
func ByName(name string) (netlink.Link, error) {
	dev, err := netlink.LinkByName(name)
	if IsGone(err) {
		return nil, nil
	}
	return dev, err
}

// Delete deletes the device called name; a device that is not there is not an error.
func Delete(name string) error {
	dev, err := ByName(name)
	if err != nil || dev == nil {
		return err
	}
	if err := netlink.LinkDel(dev); err != nil && !IsGone(err) {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	return nil
}

// IsGone tells whether err says the device does not exist.
func IsGone(err error) bool {
	var notFound netlink.LinkNotFoundError
	return errors.As(err, &notFound) || errors.Is(err, syscall.ENODEV)
}
