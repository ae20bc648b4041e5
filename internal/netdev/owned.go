package netdev

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Stale returns the addresses of placed (what trellis put on an interface before, from the
// file) that want (what the file lists now) no longer has: the only addresses of an interface
// inside a node that trellis may remove. Addresses are compared as prefixes, whatever their
// spelling. An address the node's software made is in neither list, so it is never stale.
func Stale(placed, want []string) ([]netip.Prefix, error) {
	keep := map[netip.Prefix]bool{}
	for _, a := range want {
		p, err := parse(a)
		if err != nil {
			return nil, err
		}
		keep[p] = true
	}
	var out []netip.Prefix
	for _, a := range placed {
		p, err := parse(a)
		if err != nil {
			return nil, err
		}
		if !keep[p] {
			keep[p] = true // once, however often placed lists it
			out = append(out, p)
		}
	}
	return out, nil
}

func parse(a string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(a)
	if err != nil {
		return p, fmt.Errorf("address %q: %w", a, err)
	}
	return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()), nil
}

// RemoveStale removes from link, through h, the addresses of placed (put there by trellis
// before) that want no longer lists, and nothing else; one already gone (the node's software
// removed it) is no error. Removing a primary IPv4 address keeps the other addresses of its
// subnet (the kernel would remove them with it: keepSecondaries). inNS runs its argument in
// link's network namespace.
func RemoveStale(h *netlink.Handle, link netlink.Link, placed, want []string, inNS func(func() error) error) error {
	ifname := link.Attrs().Name
	stale, err := Stale(placed, want)
	if err != nil || len(stale) == 0 {
		return err
	}
	list, err := Dump(func() ([]netlink.Addr, error) { return h.AddrList(link, netlink.FAMILY_V4) })
	if err != nil {
		return fmt.Errorf("interface %s: %w", ifname, err)
	}
	have := prefixes(list)
	for _, a := range stale {
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), a.Addr().BitLen())}}
		del := func() error {
			if err := h.AddrDel(link, addr); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
				return err
			}
			return nil
		}
		if shares(a, have, stale) {
			err = inNS(func() error { return keepSecondaries(ifname, del) })
		} else {
			err = del()
		}
		if err != nil {
			return fmt.Errorf("interface %s: removing %s: %w", ifname, a, err)
		}
	}
	return nil
}

// shares reports whether have holds an IPv4 address of p's subnet, other than p, that is not
// in gone: an address the kernel would remove with p if p is its subnet's primary address.
func shares(p netip.Prefix, have, gone []netip.Prefix) bool {
	if !p.Addr().Is4() {
		return false
	}
	for _, h := range have {
		if h != p && h.Bits() == p.Bits() && p.Masked().Contains(h.Addr()) && !slices.Contains(gone, h) {
			return true
		}
	}
	return false
}

// keepSecondaries runs del, the removal of an IPv4 address of interface ifname, so that the
// other addresses of its subnet stay: the kernel removes them with their primary address
// unless promote_secondaries is on, so it is turned on for the removal and back to what it
// was. It must run in the interface's network namespace.
func keepSecondaries(ifname string, del func() error) error {
	path := "/proc/sys/net/ipv4/conf/" + ifname + "/promote_secondaries"
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(old)) != "0" {
		return del()
	}
	if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
		return err
	}
	return errors.Join(del(), os.WriteFile(path, old, 0o644))
}

// prefixes returns the addresses of a netlink address list as prefixes.
func prefixes(list []netlink.Addr) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range list {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			ones, _ := a.Mask.Size()
			out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
		}
	}
	return out
}
