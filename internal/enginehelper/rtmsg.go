package enginehelper

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"

	"golang.org/x/sys/unix"
)

// The mirror copies routes as the kernel's own netlink messages (struct rtmsg and its
// attributes), with their devices translated into the FE's, without decoding them into
// netlink.Route and encoding them again: a full table is 170 000 of them.

// errRoute is a route message the mirror cannot read.
var errRoute = errors.New("route message")

const (
	rtmsgLen    = 12                                                    // struct rtmsg
	nlaTypeMask = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER) // an attribute's type without its flags
	rtaNHID     = 30                                                    // RTA_NH_ID (linux/rtnetlink.h), not in x/sys/unix
)

// rtMsg is one route message of the control node (a change it reported, or a route of a dump).
type rtMsg struct {
	typ      uint16 // RTM_NEWROUTE or RTM_DELROUTE
	family   uint8
	dstLen   uint8
	tos      uint8
	rtype    uint8
	protocol uint8
	flags    uint32
	table    uint32 // RTA_TABLE, else the header's
	priority uint32
	dst      []byte
	nhID     bool   // through a nexthop object, which the FEs have not
	nhShown  bool   // with its next hops shown too (RTA_OIF or RTA_MULTIPATH)
	dig      uint64 // digest, once computed
	body     []byte // rtmsg and attributes, as the kernel sent them
}

// attr is one netlink attribute: its type (flags cleared) and value.
type attr struct {
	typ uint16
	val []byte
}

// attrs splits b into attributes; f returns false to stop.
func attrs(b []byte, f func(a attr) bool) error {
	for len(b) >= unix.SizeofRtAttr {
		l := int(binary.NativeEndian.Uint16(b))
		if l < unix.SizeofRtAttr || l > len(b) {
			return fmt.Errorf("%w: attribute of length %d in %d bytes", errRoute, l, len(b))
		}
		if !f(attr{typ: binary.NativeEndian.Uint16(b[2:]) & nlaTypeMask, val: b[unix.SizeofRtAttr:l]}) {
			return nil
		}
		b = b[min(len(b), rtaAlign(l)):]
	}
	return nil
}

func rtaAlign(n int) int { return (n + unix.RTA_ALIGNTO - 1) &^ (unix.RTA_ALIGNTO - 1) }

// parseRoute reads the route message of type typ with body (rtmsg and attributes).
func parseRoute(typ uint16, body []byte) (*rtMsg, error) {
	if len(body) < rtmsgLen {
		return nil, fmt.Errorf("%w: %d bytes", errRoute, len(body))
	}
	m := &rtMsg{typ: typ, family: body[0], dstLen: body[1], tos: body[3], table: uint32(body[4]), protocol: body[5],
		rtype: body[7], flags: binary.NativeEndian.Uint32(body[8:]), body: body}
	err := attrs(body[rtmsgLen:], func(a attr) bool {
		switch a.typ {
		case unix.RTA_TABLE:
			if len(a.val) >= 4 {
				m.table = binary.NativeEndian.Uint32(a.val)
			}
		case unix.RTA_PRIORITY:
			if len(a.val) >= 4 {
				m.priority = binary.NativeEndian.Uint32(a.val)
			}
		case unix.RTA_DST:
			m.dst = a.val
		case rtaNHID:
			m.nhID = true
		case unix.RTA_OIF, unix.RTA_MULTIPATH:
			m.nhShown = true
		}
		return true
	})
	return m, err
}

// copied tells whether the mirror copies a route of this sort: not those of the local table,
// those the kernel makes from addresses (the FEs make their own), broadcast, multicast or
// cached ones. A route through a nexthop object (FRR's zebra makes them) is copied with the
// next hops the kernel shows with it (net.ipv4.nexthop_compat_mode, on by default, also
// reports each route again when its nexthop object changes); without them, it is not.
func (m *rtMsg) copied() bool {
	if m.table == unix.RT_TABLE_LOCAL || m.protocol == unix.RTPROT_KERNEL || m.flags&unix.RTM_F_CLONED != 0 ||
		(m.nhID && !m.nhShown && m.typ == unix.RTM_NEWROUTE) {
		return false
	}
	switch m.rtype {
	case unix.RTN_LOCAL, unix.RTN_BROADCAST, unix.RTN_MULTICAST:
		return false
	}
	if len(m.dst) > 0 && ((m.family == unix.AF_INET && m.dst[0]&0xf0 == 0xe0) || (m.family == unix.AF_INET6 && m.dst[0] == 0xff)) {
		return false
	}
	return true
}

// key identifies the route within its namespace: family, table, destination, priority, TOS.
func (m *rtMsg) key() string {
	k := make([]byte, 0, 12+len(m.dst))
	k = append(k, m.family, m.dstLen, m.tos)
	k = binary.BigEndian.AppendUint32(k, m.table)
	k = binary.BigEndian.AppendUint32(k, m.priority)
	return string(append(k, m.dst...))
}

// devices lists the interfaces (ifindexes) the route goes through.
func (m *rtMsg) devices() []int32 {
	var out []int32
	_ = attrs(m.body[rtmsgLen:], func(a attr) bool {
		switch {
		case a.typ == unix.RTA_OIF && len(a.val) >= 4:
			out = append(out, int32(binary.NativeEndian.Uint32(a.val)))
		case a.typ == unix.RTA_MULTIPATH:
			_ = nexthops(a.val, func(nh []byte) { out = append(out, int32(binary.NativeEndian.Uint32(nh[4:]))) })
		}
		return true
	})
	return out
}

// nexthops calls f with each struct rtnexthop (and its attributes) of an RTA_MULTIPATH value.
func nexthops(b []byte, f func(nh []byte)) error {
	for len(b) >= unix.SizeofRtNexthop {
		l := int(binary.NativeEndian.Uint16(b))
		if l < unix.SizeofRtNexthop || l > len(b) {
			return fmt.Errorf("%w: next hop of length %d in %d bytes", errRoute, l, len(b))
		}
		f(b[:l])
		b = b[min(len(b), rtaAlign(l)):]
	}
	return nil
}

// keptFlags are the route and next-hop flags a copy keeps: the kernel refuses "dead" and
// "link down", which it reports, and the others are its own notes.
const keptFlags = unix.RTNH_F_ONLINK

// translate returns the body of the route's copy for an FE: its devices given by dev (ok is
// false for a route through an interface the FE has no copy of), its flags but on-link
// cleared, without input interface, cache information and nexthop object, and without preferred source if
// noSrc (a source on the node's loopback, which the FE has not).
func (m *rtMsg) translate(dev func(int32) (int32, bool), noSrc bool) (out []byte, ok bool) {
	out = make([]byte, rtmsgLen, len(m.body))
	copy(out, m.body[:rtmsgLen])
	binary.NativeEndian.PutUint32(out[8:], m.flags&keptFlags)
	ok = true
	_ = attrs(m.body[rtmsgLen:], func(a attr) bool {
		switch a.typ {
		case unix.RTA_IIF, unix.RTA_CACHEINFO, rtaNHID: // a nexthop object: its next hops are there too
			return true
		case unix.RTA_PREFSRC:
			if noSrc {
				return true
			}
		case unix.RTA_OIF:
			var idx int32
			if idx, ok = dev(int32(binary.NativeEndian.Uint32(a.val))); !ok {
				return false
			}
			out = appendAttr(out, a.typ, binary.NativeEndian.AppendUint32(nil, uint32(idx)))
			return true
		case unix.RTA_MULTIPATH:
			var v []byte
			if v, ok = translateNexthops(a.val, dev); !ok {
				return false
			}
			out = appendAttr(out, a.typ, v)
			return true
		}
		out = appendAttr(out, a.typ, a.val)
		return true
	})
	return out, ok
}

// translateNexthops rewrites the devices and flags of an RTA_MULTIPATH value.
func translateNexthops(b []byte, dev func(int32) (int32, bool)) ([]byte, bool) {
	out := make([]byte, 0, len(b))
	ok := true
	err := nexthops(b, func(nh []byte) {
		idx, found := dev(int32(binary.NativeEndian.Uint32(nh[4:])))
		ok = ok && found
		start := len(out)
		out = append(out, nh...)
		out[start+2] &= keptFlags
		binary.NativeEndian.PutUint32(out[start+4:], uint32(idx))
		for len(out)%unix.RTA_ALIGNTO != 0 {
			out = append(out, 0)
		}
	})
	return out, ok && err == nil
}

func appendAttr(b []byte, typ uint16, val []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(unix.SizeofRtAttr+len(val)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, val...)
	for len(b)%unix.RTA_ALIGNTO != 0 {
		b = append(b, 0)
	}
	return b
}

// hasSrc tells whether the route has a preferred source.
func (m *rtMsg) hasSrc() bool {
	found := false
	_ = attrs(m.body[rtmsgLen:], func(a attr) bool {
		found = a.typ == unix.RTA_PREFSRC
		return !found
	})
	return found
}

var digestSeed = maphash.MakeSeed()

// digest identifies the route's content as the mirror copies it (the control node's devices):
// a change whose digest the FEs already have is not applied again.
func (m *rtMsg) digest() uint64 {
	if m.dig == 0 {
		b, _ := m.translate(func(i int32) (int32, bool) { return i, true }, false)
		m.dig = maphash.Bytes(digestSeed, b) | 1
	}
	return m.dig
}
