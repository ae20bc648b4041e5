package enginehelper

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// route builds a route message body: rtmsg of family, prefix length, table, protocol, type
// and flags, then attributes.
func route(family, dstLen, table, proto, rtype uint8, flags uint32, as ...attr) []byte {
	b := []byte{family, dstLen, 0, 0, table, proto, unix.RT_SCOPE_UNIVERSE, rtype}
	b = binary.NativeEndian.AppendUint32(b, flags)
	for _, a := range as {
		b = appendAttr(b, a.typ, a.val)
	}
	return b
}

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

// nexthop is a struct rtnexthop with flags and ifindex, and a gateway attribute.
func nexthop(flags uint8, ifindex uint32, gw []byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(unix.SizeofRtNexthop+unix.SizeofRtAttr+len(gw)))
	b = append(b, flags, 0)
	b = binary.NativeEndian.AppendUint32(b, ifindex)
	return appendAttr(b, unix.RTA_GATEWAY, gw)
}

var (
	dst   = attr{unix.RTA_DST, []byte{198, 18, 7, 0}}
	gw    = attr{unix.RTA_GATEWAY, []byte{10, 8, 2, 2}}
	src   = attr{unix.RTA_PREFSRC, []byte{10, 9, 9, 9}}
	cache = attr{unix.RTA_CACHEINFO, make([]byte, 16)}
)

// Which routes are copied, and how a route's copy gets the FE's devices and flags.
func TestRouteTranslate(t *testing.T) {
	dev := func(i int32) (int32, bool) {
		m := map[int32]int32{4: 2, 5: 3}
		out, ok := m[i]
		return out, ok
	}
	main, boot, uni := uint8(unix.RT_TABLE_MAIN), uint8(unix.RTPROT_BOOT), uint8(unix.RTN_UNICAST)
	cases := []struct {
		name   string
		body   []byte
		noSrc  bool
		copied bool
		ok     bool
		want   []byte
	}{
		{"via a gateway", route(unix.AF_INET, 24, main, boot, uni, 0, dst, gw, attr{unix.RTA_OIF, u32(4)}), false, true, true,
			route(unix.AF_INET, 24, main, boot, uni, 0, dst, gw, attr{unix.RTA_OIF, u32(2)})},
		{"link down, cache info, input device dropped", route(unix.AF_INET, 24, main, boot, uni, unix.RTNH_F_LINKDOWN|unix.RTNH_F_ONLINK,
			dst, attr{unix.RTA_IIF, u32(4)}, attr{unix.RTA_OIF, u32(5)}, cache), false, true, true,
			route(unix.AF_INET, 24, main, boot, uni, unix.RTNH_F_ONLINK, dst, attr{unix.RTA_OIF, u32(3)})},
		{"preferred source kept", route(unix.AF_INET, 24, main, boot, uni, 0, dst, src, attr{unix.RTA_OIF, u32(4)}), false, true, true,
			route(unix.AF_INET, 24, main, boot, uni, 0, dst, src, attr{unix.RTA_OIF, u32(2)})},
		{"preferred source dropped", route(unix.AF_INET, 24, main, boot, uni, 0, dst, src, attr{unix.RTA_OIF, u32(4)}), true, true, true,
			route(unix.AF_INET, 24, main, boot, uni, 0, dst, attr{unix.RTA_OIF, u32(2)})},
		{"multipath", route(unix.AF_INET, 24, main, boot, uni, 0, dst,
			attr{unix.RTA_MULTIPATH, append(nexthop(unix.RTNH_F_DEAD, 4, gw.val), nexthop(0, 5, gw.val)...)}), false, true, true,
			route(unix.AF_INET, 24, main, boot, uni, 0, dst, attr{unix.RTA_MULTIPATH, append(nexthop(0, 2, gw.val), nexthop(0, 3, gw.val)...)})},
		{"device the FE has not", route(unix.AF_INET, 24, main, boot, uni, 0, dst, attr{unix.RTA_OIF, u32(9)}), false, true, false, nil},
		{"multipath through a device the FE has not", route(unix.AF_INET, 24, main, boot, uni, 0, dst,
			attr{unix.RTA_MULTIPATH, append(nexthop(0, 4, gw.val), nexthop(0, 9, gw.val)...)}), false, true, false, nil},
		{"blackhole default", route(unix.AF_INET6, 0, main, boot, unix.RTN_BLACKHOLE, 0), false, true, true,
			route(unix.AF_INET6, 0, main, boot, unix.RTN_BLACKHOLE, 0)},
		{"local table", route(unix.AF_INET, 32, unix.RT_TABLE_LOCAL, boot, uni, 0, dst), false, false, true, nil},
		{"table in an attribute", route(unix.AF_INET, 32, unix.RT_TABLE_COMPAT, boot, uni, 0, dst, attr{unix.RTA_TABLE, u32(unix.RT_TABLE_LOCAL)}),
			false, false, true, nil},
		{"from an address", route(unix.AF_INET, 24, main, unix.RTPROT_KERNEL, uni, 0, dst), false, false, true, nil},
		{"multicast destination", route(unix.AF_INET6, 8, main, boot, uni, 0, attr{unix.RTA_DST, append([]byte{0xff}, make([]byte, 15)...)}),
			false, false, true, nil},
		{"broadcast", route(unix.AF_INET, 32, main, boot, unix.RTN_BROADCAST, 0, dst), false, false, true, nil},
		{"cached", route(unix.AF_INET6, 128, main, boot, uni, unix.RTM_F_CLONED), false, false, true, nil},
		{"nexthop object alone", route(unix.AF_INET, 24, main, boot, uni, 0, dst, attr{rtaNHID, u32(7)}), false, false, true, nil},
		{"nexthop object shown", route(unix.AF_INET, 24, main, boot, uni, 0, dst, attr{rtaNHID, u32(7)}, gw, attr{unix.RTA_OIF, u32(4)}),
			false, true, true, route(unix.AF_INET, 24, main, boot, uni, 0, dst, gw, attr{unix.RTA_OIF, u32(2)})},
		{"nexthop group shown", route(unix.AF_INET, 24, main, boot, uni, 0, dst, attr{rtaNHID, u32(8)},
			attr{unix.RTA_MULTIPATH, append(nexthop(0, 4, gw.val), nexthop(0, 5, gw.val)...)}), false, true, true,
			route(unix.AF_INET, 24, main, boot, uni, 0, dst, attr{unix.RTA_MULTIPATH, append(nexthop(0, 2, gw.val), nexthop(0, 3, gw.val)...)})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := parseRoute(unix.RTM_NEWROUTE, c.body)
			if err != nil {
				t.Fatal(err)
			}
			if m.copied() != c.copied {
				t.Fatalf("copied %v, want %v", m.copied(), c.copied)
			}
			if !c.copied {
				return
			}
			got, ok := m.translate(dev, c.noSrc)
			if ok != c.ok || (ok && !bytes.Equal(got, c.want)) {
				t.Fatalf("translate: %x %v, want %x %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// A route's key is its identity (family, table, destination, priority), not its content;
// its digest is its content.
func TestRouteKeyDigest(t *testing.T) {
	main, boot, uni := uint8(unix.RT_TABLE_MAIN), uint8(unix.RTPROT_BOOT), uint8(unix.RTN_UNICAST)
	parse := func(b []byte) *rtMsg {
		m, err := parseRoute(unix.RTM_NEWROUTE, b)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a := parse(route(unix.AF_INET, 24, main, boot, uni, 0, dst, gw, attr{unix.RTA_OIF, u32(4)}))
	cases := []struct {
		name             string
		b                *rtMsg
		sameKey, sameDig bool
	}{
		{"same", parse(route(unix.AF_INET, 24, main, boot, uni, 0, dst, gw, attr{unix.RTA_OIF, u32(4)})), true, true},
		{"cache info differs", parse(route(unix.AF_INET, 24, main, boot, uni, 0, dst, gw, attr{unix.RTA_OIF, u32(4)}, cache)), true, true},
		{"other gateway", parse(route(unix.AF_INET, 24, main, boot, uni, 0, dst, attr{unix.RTA_GATEWAY, []byte{10, 8, 2, 3}},
			attr{unix.RTA_OIF, u32(4)})), true, false},
		{"other prefix length", parse(route(unix.AF_INET, 25, main, boot, uni, 0, dst, gw, attr{unix.RTA_OIF, u32(4)})), false, false},
		{"other table", parse(route(unix.AF_INET, 24, main, boot, uni, 0, dst, gw, attr{unix.RTA_OIF, u32(4)}, attr{unix.RTA_TABLE, u32(100)})), false, false},
		{"other metric", parse(route(unix.AF_INET, 24, main, boot, uni, 0, dst, gw, attr{unix.RTA_OIF, u32(4)}, attr{unix.RTA_PRIORITY, u32(20)})), false, false},
	}
	for _, c := range cases {
		if (a.key() == c.b.key()) != c.sameKey || (a.digest() == c.b.digest()) != c.sameDig {
			t.Errorf("%s: same key %v, same digest %v; want %v, %v", c.name, a.key() == c.b.key(), a.digest() == c.b.digest(), c.sameKey, c.sameDig)
		}
	}
}

// Malformed messages are refused, not read past their end.
func TestRouteParseErrors(t *testing.T) {
	for _, b := range [][]byte{
		{2, 24, 0},
		append(route(unix.AF_INET, 24, 254, 3, 1, 0), 40, 0, 1, 0),
		append(route(unix.AF_INET, 24, 254, 3, 1, 0), 2, 0, 1, 0),
	} {
		if _, err := parseRoute(unix.RTM_NEWROUTE, b); err == nil {
			t.Errorf("%x: no error", b)
		}
	}
}

// The deletion of a route through a nexthop object is copied even without its next hops: the
// FEs find their copy by its key.
func TestRouteNexthopObjectDeleted(t *testing.T) {
	body := route(unix.AF_INET, 24, unix.RT_TABLE_MAIN, unix.RTPROT_BOOT, unix.RTN_UNICAST, 0, dst, attr{rtaNHID, u32(7)})
	m, err := parseRoute(unix.RTM_DELROUTE, body)
	if err != nil {
		t.Fatal(err)
	}
	if !m.copied() {
		t.Fatalf("the deletion of a route through a nexthop object is not copied")
	}
	got, ok := m.translate(func(i int32) (int32, bool) { return i, true }, false)
	want := route(unix.AF_INET, 24, unix.RT_TABLE_MAIN, unix.RTPROT_BOOT, unix.RTN_UNICAST, 0, dst)
	if !ok || !bytes.Equal(got, want) {
		t.Errorf("translate: %x %v, want %x without the nexthop object", got, ok, want)
	}
}
