package netdev

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
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

// Shares reports whether have holds an IPv4 address of p's subnet, other than p, that is not
// in gone: an address the kernel would remove with p if p is its subnet's primary address.
func Shares(p netip.Prefix, have, gone []netip.Prefix) bool {
	if !p.Addr().Is4() {
		return false
	}
	for _, h := range have {
		h = netip.PrefixFrom(h.Addr().Unmap(), h.Bits())
		if h != p && h.Bits() == p.Bits() && p.Masked().Contains(h.Addr()) && !slices.Contains(gone, h) {
			return true
		}
	}
	return false
}

// KeepSecondaries runs del, the removal of an IPv4 address of interface ifname, so that the
// other addresses of its subnet stay: the kernel removes them with their primary address
// unless promote_secondaries is on, so it is turned on for the removal and back to what it
// was. It must run in the interface's network namespace.
func KeepSecondaries(ifname string, del func() error) error {
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

// Prefixes returns the addresses of a netlink address list as prefixes.
func Prefixes(list []netlink.Addr) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range list {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			ones, _ := a.Mask.Size()
			out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
		}
	}
	return out
}
