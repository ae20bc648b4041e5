//go:build integration

package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// linkLine reads a device's index and MTU from a line of `ip -o link show`.
var linkLine = regexp.MustCompile(`^([0-9]+): \S+ <[^>]*> mtu ([0-9]+) `)

func parseLink(t *testing.T, what, out string) (index, mtu int) {
	t.Helper()
	s := linkLine.FindStringSubmatch(out)
	if s == nil {
		t.Fatalf("%s: cannot read `ip -o link show`: %q", what, out)
	}
	index, _ = strconv.Atoi(s[1])
	mtu, _ = strconv.Atoi(s[2])
	return index, mtu
}

// checkTunnelMTULive lowers the MTU of the spread network's links across machines, bc
// (point-to-point) and the LAN, by 100 in the file: on every machine their interfaces inside
// the nodes keep their ifindex and get the new MTU, so do the links' tunnel devices, and the
// largest packets of the new MTU cross whole.
func checkTunnelMTULive(t *testing.T, m *machines, name, tunnel string, fit int) {
	mtu := fit - 100
	where := m.where(t, name)
	ifaces := append(append([]string{}, spreadIfaces["bc"]...), spreadIfaces["lan"]...)
	read := func(ifc string) (index, mtu int) {
		node, ifname, _ := strings.Cut(ifc, ":")
		return parseLink(t, ifc, m.mustExec(t, where[node], name, node, "ip", "-o", "link", "show", ifname))
	}
	before := map[string]int{}
	for _, ifc := range ifaces {
		before[ifc], _ = read(ifc)
	}
	lan := "    endpoints: [a:eth2, b:eth3, c:eth2]\n"
	topo := strings.Replace(spreadTopo(name, m.hostsYAML(tunnel), mtu, ""), lan, lan+fmt.Sprintf("    mtu: %d\n", mtu), 1)
	path := writeTopo(t, topo)
	for i := 1; i <= 3; i++ {
		out := m.trellis(t, i, "up", path)
		if want := fmt.Sprintf("~ link lan: mtu %d -> %d\n", fit, mtu); !strings.Contains(out, want) {
			t.Errorf("up on m%d said %q, want it to contain %q (a live change)", i, out, want)
		}
	}
	for _, ifc := range ifaces {
		if index, got := read(ifc); index != before[ifc] || got != mtu {
			t.Errorf("%s after the MTU change: ifindex %d (was %d), MTU %d; want the same interface with MTU %d", ifc, index, before[ifc], got, mtu)
		}
	}
	for i := 1; i <= 3; i++ {
		info := m.inspect(t, i, name)
		seen := map[string]bool{} // VXLAN: one device for every tunnel of a link
		for _, lname := range []string{"bc", "lan"} {
			if _, ok := spreadLinks[i][lname]; !ok {
				continue
			}
			for _, tn := range info.link(t, lname).Tunnels {
				if seen[tn.Device] {
					continue
				}
				seen[tn.Device] = true
				out, err := m.inNS(i, "ip", "-o", "link", "show", tn.Device)
				if err != nil {
					t.Fatalf("m%d: tunnel device %s: %v", i, tn.Device, err)
				}
				if _, got := parseLink(t, tn.Device, out); got != mtu {
					t.Errorf("m%d: link %s: tunnel device %s has MTU %d, want %d", i, lname, tn.Device, got, mtu)
				}
			}
		}
	}
	v4, v6 := fmt.Sprint(mtu-28), fmt.Sprint(mtu-48)
	m.ping(t, 2, name, "b", "10.0.2.2", "-M", "do", "-s", v4) // bc, m2 -> m3
	m.ping(t, 3, name, "c", "fd02::1", "-M", "do", "-s", v6)  // bc, m3 -> m2
	m.ping(t, 1, name, "a", "10.0.9.3", "-M", "do", "-s", v4) // LAN, m1 -> m3
	m.ping(t, 3, name, "c", "fd09::2", "-M", "do", "-s", v6)  // LAN, m3 -> m2
}
