package substrate

import (
	"fmt"
	"net/netip"

	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
)

// LocalHost tells which of a network's hosts this machine is: the one whose underlay address
// is configured here. It fails if none or several are.
func LocalHost(n *spec.Network) (string, error) {
	var found []string
	for _, h := range n.Hosts {
		if _, err := underlayDevice(h.Address); err == nil {
			found = append(found, h.Name)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("%s: no host's address is configured on this machine; say which host it is with --host", n.File)
	default:
		return "", fmt.Errorf("%s: hosts %v all have addresses on this machine; say which one it is with --host", n.File, found)
	}
}

// underlayDevice finds the device that holds the underlay address addr.
func underlayDevice(addr netip.Addr) (netlink.Link, error) {
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
