// Package netdev writes the substrate's devices, for every kind (its readers are in rtnl, its
// namespaces in netnsutil): bringing a substrate device up without letting the substrate speak
// on it, finding the underlay device, listing and deleting devices, running dumps again that the
// kernel interrupted, and telling "already gone" from real failures.
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
	var dev netlink.Link
	err := Do(func(h *netlink.Handle) error {
		var err error
		if dev, err = h.LinkByName(name); err == nil && dev.Attrs().Flags&1 == 0 { // net.FlagUp
			err = h.LinkSetUp(dev)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return dev, nil
}

// Down brings a device down.
func Down(name string) error {
	return Do(func(h *netlink.Handle) error {
		dev, err := h.LinkByName(name)
		if err == nil {
			err = h.LinkSetDown(dev)
		}
		return err
	})
}

// SetMTU gives the devices called names the MTU mtu, in place, where they have another; an
// mtu of 0 (the kernel's default) leaves them as they are.
func SetMTU(mtu int, names ...string) error {
	if mtu == 0 {
		return nil
	}
	return Do(func(h *netlink.Handle) error {
		for _, name := range names {
			dev, err := h.LinkByName(name)
			if err == nil && dev.Attrs().MTU != mtu {
				err = h.LinkSetMTU(dev, mtu)
			}
			if err != nil {
				return fmt.Errorf("%s: mtu %d: %w", name, mtu, err)
			}
		}
		return nil
	})
}

// Underlay finds the device that holds the underlay address addr.
func Underlay(addr netip.Addr) (netlink.Link, error) {
	addrs, err := Dump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V4) })
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

// List lists the devices of the process's network namespace, listing again when the kernel
// interrupts the dump because devices changed during it.
func List() ([]netlink.Link, error) {
	return Dump(func() ([]netlink.Link, error) {
		var links []netlink.Link
		err := Do(func(h *netlink.Handle) error {
			var err error
			links, err = h.LinkList()
			return err
		})
		return links, err
	})
}

// Dump runs a netlink dump, running it again (up to 50 times) while the kernel interrupts it
// because what it lists changed meanwhile (netlink.ErrDumpInterrupted): an interrupted dump
// may miss or repeat entries.
func Dump[T any](dump func() (T, error)) (T, error) {
	out, err := dump()
	for try := 0; errors.Is(err, netlink.ErrDumpInterrupted) && try < 50; try++ {
		out, err = dump()
	}
	return out, err
}

// ErrNoDevice is returned when a device that must exist is not there.
var ErrNoDevice = errors.New("no such device")

// ByName returns the device called name, or nil if there is none.
func ByName(name string) (netlink.Link, error) {
	dev, err := get(name)
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
	if err := Do(func(h *netlink.Handle) error { return h.LinkDel(dev) }); err != nil && !IsGone(err) {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	return nil
}

// IsGone tells whether err says the device does not exist.
func IsGone(err error) bool {
	var notFound netlink.LinkNotFoundError
	return errors.As(err, &notFound) || errors.Is(err, syscall.ENODEV)
}
