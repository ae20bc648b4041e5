package substrate

import (
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/kinds/veth"
	"github.com/trellisnet/trellis/internal/logline"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
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

// TestReplugWhy: a direct link that goes to ports only because the kernel has no tcx says so
// in the refusal, with the kernel found and the one needed; one that needs ports on every
// kernel (a rate), or that stays one pair (tcx), says nothing more.
func TestReplugWhy(t *testing.T) {
	defer func(f func() bool) { plan.WireEnforces = f }(plan.WireEnforces)
	ports := func() []plan.Port { return []plan.Port{{Node: "a", Ifname: "eth1"}, {Node: "b", Ifname: "eth1"}} }
	old := &plan.Link{Name: "l", Connector: veth.Name, Ports: ports()}
	down := &plan.Link{Name: "l", Connector: spec.DefaultP2PConnector, Ports: ports(), Down: true}
	rated := &plan.Link{Name: "l", Connector: spec.DefaultP2PConnector, Ports: ports(), Rate: 1e6}
	for _, c := range []struct {
		tcx  bool
		l    *plan.Link
		want string
	}{
		{false, down, " (it goes to ports: " + NoTCX + "; kernel " + dataplane.KernelRelease() + ")"},
		{true, down, ""},
		{false, rated, ""},
		{false, old, ""},
	} {
		plan.WireEnforces = func() bool { return c.tcx }
		if got := replugWhy(old, c.l); got != c.want {
			t.Errorf("tcx %v, %s (down %v, rate %d): %q, want %q", c.tcx, c.l.Connector, c.l.Down, c.l.Rate, got, c.want)
		}
	}
}

// TestNoteReplugs: a live change that re-plugs a direct link says so, naming its interfaces,
// what the nodes see, why it had no ports and how to keep them; a link not re-plugged is not
// named.
func TestNoteReplugs(t *testing.T) {
	defer func(f func() bool) { plan.WireEnforces = f }(plan.WireEnforces)
	plan.WireEnforces = func() bool { return true }
	ports := func() []plan.Port { return []plan.Port{{Node: "a", Ifname: "eth1"}, {Node: "b", Ifname: "eth1"}} }
	old := &plan.Plan{Links: []*plan.Link{
		{Name: "l", Connector: veth.Name, Ports: ports()},
		{Name: "m", Connector: veth.Name, Ports: ports()},
	}}
	p := &plan.Plan{Links: []*plan.Link{
		{Name: "l", Connector: spec.DefaultP2PConnector, Ports: ports(), Rate: 1e6},
		{Name: "m", Connector: veth.Name, Ports: ports(), Down: true},
	}}
	var out strings.Builder
	noteReplugs(old, p, logline.Logger(&out, nil))
	want := "link l: a:eth1, b:eth1 to ports " + Replugged + "; " + KeepPorts + "\n"
	if out.String() != want {
		t.Errorf("noteReplugs said %q\nwant %q", out.String(), want)
	}
}
