package rtnl

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"slices"

	"golang.org/x/sys/unix"
)

// rtextFilterSkipStats is RTEXT_FILTER_SKIP_STATS of linux/rtnetlink.h.
const rtextFilterSkipStats = 1 << 3

// Link is what a reader needs of a device.
type Link struct {
	Index     int
	Name      string
	Flags     uint32 // IFF_* flags: IFF_UP is administratively up
	MTU       int
	OperState uint8            // IF_OPER_* (RFC 2863), as netlink.LinkOperState counts them
	MAC       net.HardwareAddr // nil when the kernel gives none or all zeros
	// PeerNetNsID is the id, in the reader's namespace, of the namespace of a veth device's
	// peer (IFLA_LINK_NETNSID); -1 when the device has no peer in another namespace.
	PeerNetNsID int
	Stats       Stats
}

// Stats are a device's counters (struct rtnl_link_stats64).
type Stats struct {
	RxPackets, TxPackets, RxBytes, TxBytes, RxDropped, TxDropped uint64
}

// Links lists the devices of the namespace with id nsid in the Conn's namespace (Own for the
// Conn's namespace itself), in the kernel's order (by index). Of its own namespace (a
// machine's thousands of ports) it asks the kernel to leave out what it does not decode and
// is costly to make: each device's IPv6 counters, summed over every CPU, and its virtual
// functions' (RTEXT_FILTER_SKIP_STATS; the device's own counters, Stats, are there all the
// same). Not of another namespace: with a filter mask, the kernel sizes the dump's buffer by
// walking every device of the Conn's namespace (rtnl_calcit), which made reading a thousand
// nodes' few devices each take seconds.
func (c *Conn) Links(nsid int) ([]Link, error) {
	hdr := make([]byte, unix.SizeofIfInfomsg)
	hdr[0] = unix.AF_UNSPEC
	at := int32Attr(unix.IFLA_EXT_MASK, rtextFilterSkipStats)
	if nsid != Own {
		at = int32Attr(unix.IFLA_TARGET_NETNSID, int32(nsid))
	}
	var out []Link
	err := c.dump(unix.RTM_GETLINK, hdr, at, func(msg []byte) error {
		l, err := parseLink(msg)
		if err == nil {
			out = append(out, l)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listing devices of namespace %d: %w", nsid, err)
	}
	return out, nil
}

// parseLink decodes an RTM_NEWLINK message (after the netlink header).
func parseLink(msg []byte) (Link, error) {
	if len(msg) < unix.SizeofIfInfomsg {
		return Link{}, fmt.Errorf("rtnl: link message of %d bytes", len(msg))
	}
	l := Link{Index: int(int32(binary.NativeEndian.Uint32(msg[4:]))), Flags: binary.NativeEndian.Uint32(msg[8:]), PeerNetNsID: -1}
	attrs(msg[unix.SizeofIfInfomsg:], func(a attr) {
		switch a.typ {
		case unix.IFLA_IFNAME:
			l.Name = string(bytes.TrimRight(a.val, "\x00"))
		case unix.IFLA_MTU:
			if len(a.val) >= 4 {
				l.MTU = int(binary.NativeEndian.Uint32(a.val))
			}
		case unix.IFLA_OPERSTATE:
			if len(a.val) >= 1 {
				l.OperState = a.val[0]
			}
		case unix.IFLA_ADDRESS:
			if slices.ContainsFunc(a.val, func(b byte) bool { return b != 0 }) {
				l.MAC = net.HardwareAddr(bytes.Clone(a.val))
			} // all zeros (loopback) is none, as netlink.LinkDeserialize has it
		case unix.IFLA_LINK_NETNSID:
			if len(a.val) >= 4 {
				l.PeerNetNsID = int(int32(binary.NativeEndian.Uint32(a.val)))
			}
		case unix.IFLA_STATS64:
			if len(a.val) >= 64 {
				u := func(i int) uint64 { return binary.NativeEndian.Uint64(a.val[8*i:]) }
				l.Stats = Stats{RxPackets: u(0), TxPackets: u(1), RxBytes: u(2), TxBytes: u(3), RxDropped: u(6), TxDropped: u(7)}
			}
		}
	})
	if l.Name == "" {
		return l, fmt.Errorf("rtnl: device %d without a name", l.Index)
	}
	return l, nil
}

// Addr is an address of a device.
type Addr struct {
	Index  int        // the device's
	Prefix *net.IPNet // the local address and its prefix length, as `ip addr` shows it
}

// Addrs lists the addresses of every device of the namespace with id nsid (Own for the
// Conn's), IPv4 before IPv6, each family by device.
func (c *Conn) Addrs(nsid int) ([]Addr, error) {
	hdr := make([]byte, unix.SizeofIfAddrmsg)
	hdr[0] = unix.AF_UNSPEC
	var at []byte
	if nsid != Own {
		at = int32Attr(unix.IFA_TARGET_NETNSID, int32(nsid))
	}
	var out []Addr
	err := c.dump(unix.RTM_GETADDR, hdr, at, func(msg []byte) error {
		a, ok := parseAddr(msg)
		if ok {
			out = append(out, a)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing addresses of namespace %d: %w", nsid, err)
	}
	return out, nil
}

// parseAddr decodes an RTM_NEWADDR message: the local address (IFA_LOCAL, or IFA_ADDRESS
// where there is none, as IPv6 sends it) with the message's prefix length.
func parseAddr(msg []byte) (Addr, bool) {
	if len(msg) < unix.SizeofIfAddrmsg {
		return Addr{}, false
	}
	family, plen := msg[0], int(msg[1])
	a := Addr{Index: int(binary.NativeEndian.Uint32(msg[4:]))}
	var address, local []byte
	attrs(msg[unix.SizeofIfAddrmsg:], func(at attr) {
		switch at.typ {
		case unix.IFA_ADDRESS:
			address = at.val
		case unix.IFA_LOCAL:
			local = at.val
		}
	})
	ip := local
	if ip == nil {
		ip = address
	}
	bits := 8 * len(ip)
	if (family != unix.AF_INET && family != unix.AF_INET6) || (bits != 32 && bits != 128) {
		return Addr{}, false
	}
	a.Prefix = &net.IPNet{IP: net.IP(bytes.Clone(ip)), Mask: net.CIDRMask(plen, bits)}
	return a, true
}
