package rtnl

import (
	"encoding/binary"
	"net"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// msg builds a route netlink message body: a header of hdrLen bytes (its first bytes set by
// hdr) followed by attributes.
func msg(hdrLen int, hdr func([]byte), attrs ...[]byte) []byte {
	b := make([]byte, hdrLen)
	hdr(b)
	for _, a := range attrs {
		b = append(b, a...)
	}
	return b
}

// rta encodes one route attribute, padded to 4 bytes.
func rta(typ uint16, val []byte) []byte {
	b := make([]byte, 4, 4+len(val)+3)
	binary.NativeEndian.PutUint16(b[0:], uint16(4+len(val)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, val...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func TestParseLink(t *testing.T) {
	stats := make([]byte, 0, 8*23)
	for i := range 23 {
		stats = binary.NativeEndian.AppendUint64(stats, uint64(100+i))
	}
	ifi := func(index int32, flags uint32) func([]byte) {
		return func(b []byte) {
			binary.NativeEndian.PutUint32(b[4:], uint32(index))
			binary.NativeEndian.PutUint32(b[8:], flags)
		}
	}
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 7}
	cases := []struct {
		name string
		msg  []byte
		want Link
		err  bool
	}{
		{"veth port", msg(unix.SizeofIfInfomsg, ifi(7, unix.IFF_UP), rta(unix.IFLA_IFNAME, []byte("tp0\x00")), rta(unix.IFLA_MTU, u32(1500)),
			rta(unix.IFLA_OPERSTATE, []byte{6}), rta(unix.IFLA_ADDRESS, mac), rta(unix.IFLA_LINK_NETNSID, u32(3)), rta(unix.IFLA_STATS64, stats)),
			Link{Index: 7, Name: "tp0", Flags: unix.IFF_UP, MTU: 1500, OperState: 6, MAC: mac, PeerNetNsID: 3,
				Stats: Stats{RxPackets: 100, TxPackets: 101, RxBytes: 102, TxBytes: 103, RxDropped: 106, TxDropped: 107}}, false},
		{"no peer, short stats ignored", msg(unix.SizeofIfInfomsg, ifi(1, 0), rta(unix.IFLA_IFNAME, []byte("lo\x00")), rta(unix.IFLA_STATS64, stats[:16])),
			Link{Index: 1, Name: "lo", PeerNetNsID: -1}, false},
		{"loopback: a MAC of zeros is none", msg(unix.SizeofIfInfomsg, ifi(1, 0), rta(unix.IFLA_IFNAME, []byte("lo\x00")), rta(unix.IFLA_ADDRESS, make([]byte, 6))),
			Link{Index: 1, Name: "lo", PeerNetNsID: -1}, false},
		{"no name", msg(unix.SizeofIfInfomsg, ifi(2, 0), rta(unix.IFLA_MTU, u32(9000))), Link{}, true},
		{"short header", []byte{0, 0, 0}, Link{}, true},
		{"attribute longer than the message", append(msg(unix.SizeofIfInfomsg, ifi(3, 0), rta(unix.IFLA_IFNAME, []byte("a\x00"))), 0xff, 0, 3, 0),
			Link{Index: 3, Name: "a", PeerNetNsID: -1}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseLink(c.msg)
			if (err != nil) != c.err {
				t.Fatalf("error %v, want error: %v", err, c.err)
			}
			if c.err {
				return
			}
			if got.Index != c.want.Index || got.Name != c.want.Name || got.Flags != c.want.Flags || got.MTU != c.want.MTU ||
				got.OperState != c.want.OperState || got.MAC.String() != c.want.MAC.String() || got.PeerNetNsID != c.want.PeerNetNsID || got.Stats != c.want.Stats {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestParseAddr(t *testing.T) {
	ifa := func(family, plen byte, index uint32) func([]byte) {
		return func(b []byte) { b[0], b[1] = family, plen; binary.NativeEndian.PutUint32(b[4:], index) }
	}
	v6 := net.ParseIP("fd00::1")
	cases := []struct {
		name string
		msg  []byte
		want string // "" when the message gives no address
	}{
		{"IPv4: local, not the peer", msg(unix.SizeofIfAddrmsg, ifa(unix.AF_INET, 30, 5), rta(unix.IFA_ADDRESS, []byte{10, 0, 0, 2}), rta(unix.IFA_LOCAL, []byte{10, 0, 0, 1})), "10.0.0.1/30"},
		{"IPv6: address only", msg(unix.SizeofIfAddrmsg, ifa(unix.AF_INET6, 64, 5), rta(unix.IFA_ADDRESS, v6)), "fd00::1/64"},
		{"no address", msg(unix.SizeofIfAddrmsg, ifa(unix.AF_INET, 8, 1)), ""},
		{"wrong family", msg(unix.SizeofIfAddrmsg, ifa(unix.AF_PACKET, 8, 1), rta(unix.IFA_ADDRESS, []byte{1, 2, 3, 4})), ""},
		{"IPv4 family, 16 bytes", msg(unix.SizeofIfAddrmsg, ifa(unix.AF_INET, 8, 1), rta(unix.IFA_ADDRESS, []byte{1, 2, 3, 4, 5})), ""},
		{"short header", []byte{2, 8}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := parseAddr(c.msg)
			if !ok {
				if c.want != "" {
					t.Fatalf("no address, want %s", c.want)
				}
				return
			}
			if got.Prefix.String() != c.want || got.Index != 5 {
				t.Errorf("got %s on %d, want %s on 5", got.Prefix, got.Index, c.want)
			}
		})
	}
}

func TestParseQdisc(t *testing.T) {
	tcm := func(index int32) func([]byte) {
		return func(b []byte) { binary.NativeEndian.PutUint32(b[4:], uint32(index)) }
	}
	queue := rta(tcaStatsQueue, append(append(u32(1), u32(2)...), append(u32(42), u32(0)...)...))
	cases := []struct {
		name      string
		msg       []byte
		kind      string
		index     int
		drops     uint64
		wantFound bool
	}{
		{"tbf with drops", msg(sizeofTcMsg, tcm(9), rta(unix.TCA_KIND, []byte("tbf\x00")), rta(unix.TCA_STATS2, queue)), "tbf", 9, 42, true},
		{"another kind", msg(sizeofTcMsg, tcm(9), rta(unix.TCA_KIND, []byte("clsact\x00")), rta(unix.TCA_STATS2, queue)), "tbf", 0, 0, false},
		{"tbf without statistics", msg(sizeofTcMsg, tcm(9), rta(unix.TCA_KIND, []byte("tbf\x00"))), "tbf", 0, 0, false},
		{"short", []byte{0}, "tbf", 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			index, drops, ok := parseQdisc(c.msg, c.kind)
			if ok != c.wantFound || (ok && (index != c.index || drops != c.drops)) {
				t.Errorf("got %d drops on %d (%v), want %d on %d (%v)", drops, index, ok, c.drops, c.index, c.wantFound)
			}
		})
	}
}

// nlmsg encodes one netlink message.
func nlmsg(typ, flags uint16, seq uint32, body []byte) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body)+3)
	binary.NativeEndian.PutUint32(b[0:], uint32(unix.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], seq)
	b = append(b, body...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func TestMessages(t *testing.T) {
	errno := func(e unix.Errno) []byte { return append(u32(uint32(-int32(e))), make([]byte, 16)...) }
	cases := []struct {
		name       string
		in         []byte
		bodies     int
		done, intr bool
		err        string
	}{
		{"two messages, then done", append(append(nlmsg(unix.RTM_NEWLINK, 0, 5, []byte{1, 2, 3}), nlmsg(unix.RTM_NEWLINK, 0, 5, []byte{4})...),
			nlmsg(unix.NLMSG_DONE, 0, 5, u32(0))...), 2, true, false, ""},
		{"a stale answer is skipped", append(nlmsg(unix.RTM_NEWLINK, 0, 4, nil), nlmsg(unix.RTM_NEWLINK, 0, 5, nil)...), 1, false, false, ""},
		{"interrupted", append(nlmsg(unix.RTM_NEWLINK, unix.NLM_F_DUMP_INTR, 5, nil), nlmsg(unix.NLMSG_DONE, 0, 5, u32(0))...), 1, true, true, ""},
		{"kernel error", nlmsg(unix.NLMSG_ERROR, 0, 5, errno(unix.EINVAL)), 0, true, false, "invalid argument"},
		{"acknowledgement", nlmsg(unix.NLMSG_ERROR, 0, 5, errno(0)), 0, true, false, ""},
		{"length past the end", longer(nlmsg(unix.RTM_NEWLINK, 0, 5, nil), 200), 0, false, false, "message of 200 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn := &Conn{seq: 5}
			bodies := 0
			done, intr, err := conn.messages(c.in, func([]byte) error { bodies++; return nil })
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("error %v, want %q", err, c.err)
			}
			if c.err == "" && (bodies != c.bodies || done != c.done || intr != c.intr) {
				t.Errorf("%d messages, done %v, interrupted %v; want %d, %v, %v", bodies, done, intr, c.bodies, c.done, c.intr)
			}
		})
	}
}

// longer makes message b claim n bytes.
func longer(b []byte, n uint32) []byte {
	binary.NativeEndian.PutUint32(b[0:], n)
	return b
}
