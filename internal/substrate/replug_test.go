package substrate

import (
	"net"
	"reflect"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func addr(t *testing.T, cidr string, flags int) netlink.Addr {
	t.Helper()
	ip, ipn, err := net.ParseCIDR(cidr)
	if err != nil {
		t.Fatal(err)
	}
	ipn.IP = ip
	return netlink.Addr{IPNet: ipn, Flags: flags}
}

// TestSoftMade: what on a node's interface counts as made by the node's software (decision
// 15), and what does not (trellis's addresses, the kernel's link-local address and routes,
// the default qdisc, what names other interfaces).
func TestSoftMade(t *testing.T) {
	const idx, other = 7, 8
	root := func(kind string, handle uint32) netlink.Qdisc {
		return &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_ROOT, Handle: handle}, QdiscType: kind}
	}
	cases := []struct {
		name string
		s    func() ifaceSoft
		want []string
	}{
		{"nothing", func() ifaceSoft { return ifaceSoft{} }, nil},
		{"the file's address and the kernel's", func() ifaceSoft {
			return ifaceSoft{
				Addrs:  []netlink.Addr{addr(t, "10.9.9.1/24", unix.IFA_F_PERMANENT), addr(t, "fe80::1/64", unix.IFA_F_PERMANENT)},
				Routes: []netlink.Route{{LinkIndex: idx, Protocol: unix.RTPROT_KERNEL, Table: unix.RT_TABLE_MAIN}},
				Qdiscs: []netlink.Qdisc{root("noqueue", 0)},
			}
		}, nil},
		{"a user's address", func() ifaceSoft {
			return ifaceSoft{Addrs: []netlink.Addr{addr(t, "10.9.9.1/24", 0), addr(t, "10.7.7.1/24", unix.IFA_F_PERMANENT)}}
		}, []string{"10.7.7.1/24"}},
		{"a user's link-local address", func() ifaceSoft {
			return ifaceSoft{Addrs: []netlink.Addr{addr(t, "fe80::99/128", unix.IFA_F_PERMANENT)}}
		}, []string{"fe80::99/128"}},
		{"routes by protocol, any table, multipath", func() ifaceSoft {
			return ifaceSoft{Routes: []netlink.Route{
				{LinkIndex: idx, Protocol: unix.RTPROT_BOOT, Table: unix.RT_TABLE_MAIN},
				{LinkIndex: idx, Protocol: netlink.RouteProtocol(188), Table: 100},
				{MultiPath: []*netlink.NexthopInfo{{LinkIndex: other}, {LinkIndex: idx}}, Protocol: netlink.RouteProtocol(188)},
				{LinkIndex: other, Protocol: unix.RTPROT_BOOT},
			}}
		}, []string{"1 route (proto boot)", "2 routes (proto ospf)"}},
		{"rules naming it", func() ifaceSoft {
			return ifaceSoft{Rules: []netlink.Rule{{IifName: "eth1"}, {OifName: "eth1"}, {IifName: "eth2"}}}
		}, []string{"2 rules"}},
		{"qdiscs", func() ifaceSoft {
			return ifaceSoft{Qdiscs: []netlink.Qdisc{root("netem", 0x80010000),
				&netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_INGRESS, Handle: 0xffff0000}, QdiscType: "clsact"}}}
		}, []string{"a root netem qdisc", "a clsact qdisc"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := softMade(idx, "eth1", []string{"10.9.9.1/24"}, c.s())
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("softMade = %q, want %q", got, c.want)
			}
		})
	}
}

// TestRefusal: the refusal names what goes and both ways out.
func TestRefusal(t *testing.T) {
	got := refusal([]string{"link r1:eth1--r2:eth1: r1:eth1 has 10.7.7.1/24 that its software made"})
	want := "link r1:eth1--r2:eth1: r1:eth1 has 10.7.7.1/24 that its software made: it would go with the interfaces, made anew (decision 15). " + ReplugFix
	if got != want {
		t.Errorf("refusal = %q\nwant %q", got, want)
	}
}
