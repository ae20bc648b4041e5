//go:build integration

package integration

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/vishvananda/netlink"
)

// liveAddr holds the address of every interface the tests of this file may use.
var liveAddr = map[string]string{
	"a:eth1": "10.0.1.1/24", "b:eth1": "10.0.1.2/24",
	"b:eth2": "10.0.2.2/24", "c:eth1": "10.0.2.3/24",
	"c:eth2": "10.0.3.3/24", "d:eth1": "10.0.3.4/24",
	"a:eth2": "10.0.9.1/24", "b:eth3": "10.0.9.2/24", "c:eth3": "10.0.9.3/24",
}

// liveTopo is a network of nodes (names, with extra node lines after a colon, "c:    sysctl:
// ...") joined by links (YAML list items); each node gets the address of liveAddr (or of
// override) on each of its interfaces that a link names.
func liveTopo(nodes []string, links string, override map[string]string) string {
	var b strings.Builder
	b.WriteString("name: live\nnodes:\n")
	for _, spec := range nodes {
		name, extra, _ := strings.Cut(spec, ":")
		fmt.Fprintf(&b, "  %s:\n    addresses:\n", name)
		for _, ifname := range []string{"eth1", "eth2", "eth3"} {
			ep := name + ":" + ifname
			addr := liveAddr[ep]
			if o, ok := override[ep]; ok {
				addr = o
			}
			if strings.Contains(links, ep+",") || strings.Contains(links, ep+"]") {
				fmt.Fprintf(&b, "      %s: [%s]\n", ifname, addr)
			}
		}
		b.WriteString(extra)
	}
	return b.String() + "links:\n" + links
}

const (
	ab   = "  - endpoints: [a:eth1, b:eth1]\n"
	bc   = "  - endpoints: [b:eth2, c:eth1]\n"
	cd   = "  - endpoints: [c:eth2, d:eth1]\n"
	lan2 = "  - endpoints: [a:eth2, b:eth3]\n    name: lan\n    connector: lan\n"
	lan3 = "  - endpoints: [a:eth2, b:eth3, c:eth3]\n    name: lan\n"
)

var (
	abc  = []string{"a", "b", "c"}
	abcd = []string{"a", "b", "c", "d"}
)

// TestLiveChanges applies a sequence of edits to a running network. After each, the nodes the
// edit does not concern keep their processes, the host holds exactly the objects of the file,
// and the network forwards as the file says.
func TestLiveChanges(t *testing.T) {
	e := start(t)
	path := writeTopo(t, liveTopo(abc, ab+bc+lan2, nil))
	mustTrellis(t, e.state, "up", path)
	b20 := map[string]string{"b:eth2": "10.0.2.20/24"}
	var aEth1 string // a's eth1 as `ip -o link` shows it, before the bridge's MTU changes
	ifIndex := func(t *testing.T, node, ifname string) string {
		out := mustExec(t, e.state, "live", node, "ip", "-o", "link", "show", ifname)
		index, _, _ := strings.Cut(out, ":")
		return index
	}
	steps := []struct {
		name     string
		nodes    []string
		links    string
		override map[string]string
		say      []string // what up must say it changed
		restarts []string // nodes that may get a new process
		pings    [][2]string
		check    func(t *testing.T, info *netInfo)
	}{
		{"add a node and a link", abcd, ab + bc + lan2 + cd, nil,
			[]string{"+ node d", "+ link c:eth2--d:eth1"}, nil, [][2]string{{"d", "10.0.3.3"}, {"a", "10.0.1.2"}}, nil},
		{"add a LAN member", abcd, ab + bc + lan3 + cd, nil,
			[]string{"~ link lan: member c:eth3 added"}, nil, [][2]string{{"c", "10.0.9.1"}, {"a", "10.0.9.2"}}, nil},
		{"LAN table size and ageing", abcd, ab + bc + lan3 + "    table: 2\n    ageing: 60s\n" + cd, nil,
			[]string{"~ link lan: table default -> 2; ageing default -> 1m0s"}, nil, [][2]string{{"a", "10.0.9.2"}, {"c", "10.0.9.1"}},
			func(t *testing.T, _ *netInfo) { // after the pings, which the LAN learnt from
				checkLANTable(t, inspect(t, e.state, "live").link(t, "lan"), 2, 60)
			}},
		{"rate and duplication", abcd, ab + "    rate: 20mbit\n    duplicate: 1%\n" + bc + lan3 + cd, nil,
			[]string{"rate none -> 20mbit", "impairment from a:eth1 none -> duplicate 1%"}, nil, [][2]string{{"a", "10.0.1.2"}},
			func(t *testing.T, info *netInfo) {
				checkShaperOn(t, info.link(t, "a:eth1--b:eth1").Endpoints[0].Port, true)
			}},
		{"MTU", abcd, ab + bc + "    mtu: 1400\n" + lan3 + cd, nil,
			// a-b names no connector: with nothing to enforce, it is one veth pair again
			[]string{"mtu default -> 1400", "connector shortbridge -> veth (a:eth1, b:eth1 to one veth pair re-plugged", "rate 20mbit -> none"}, nil, [][2]string{{"c", "10.0.2.2"}},
			func(t *testing.T, info *netInfo) {
				if m := info.link(t, "b:eth2--c:eth1").MTU; m != 1400 {
					t.Errorf("link b-c has MTU %d, want 1400", m)
				}
				if l := info.link(t, "a:eth1--b:eth1"); l.Connector != "veth" || l.Endpoints[0].Port != "" || l.Endpoints[1].Port != "" {
					t.Errorf("link a-b without its rate: connector %s, ports %q and %q; want veth, no port (nothing to shape)", l.Connector, l.Endpoints[0].Port, l.Endpoints[1].Port)
				}
			}},
		{"connector", abcd, ab + "    connector: bridge\n" + bc + "    mtu: 1400\n" + lan3 + cd, nil,
			[]string{"~ link a:eth1--b:eth1: connector veth -> bridge (a:eth1, b:eth1 to ports re-plugged"}, nil, [][2]string{{"b", "10.0.1.1"}},
			func(t *testing.T, info *netInfo) {
				if l := info.link(t, "a:eth1--b:eth1"); l.Connector != "bridge" || l.Bridge == "" {
					t.Errorf("link a-b: connector %s, bridge %q", l.Connector, l.Bridge)
				}
				aEth1 = ifIndex(t, "a", "eth1")
			}},
		{"MTU of a bridge", abcd, ab + "    connector: bridge\n    mtu: 9000\n" + bc + "    mtu: 1400\n" + lan3 + cd, nil,
			[]string{"~ link a:eth1--b:eth1: mtu default -> 9000\n"}, nil, [][2]string{{"b", "10.0.1.1"}},
			func(t *testing.T, info *netInfo) { // live: the same interface, and full-size frames cross
				if got := ifIndex(t, "a", "eth1"); got != aEth1 {
					t.Errorf("a's eth1 has ifindex %s, was %s: made anew", got, aEth1)
				}
				mustExec(t, e.state, "live", "a", "ping", "-c", "1", "-W", "5", "-M", "do", "-s", "8972", "10.0.1.2")
			}},
		{"address of a link interface", abcd, ab + "    connector: bridge\n    mtu: 9000\n" + bc + "    mtu: 1400\n" + lan3 + cd, b20,
			[]string{"addresses of b:eth2 [10.0.2.2/24] -> [10.0.2.20/24]"}, nil, [][2]string{{"c", "10.0.2.20"}}, nil},
		{"remove a node, its link and a LAN member", abc, ab + "    connector: bridge\n    mtu: 9000\n" + bc + "    mtu: 1400\n" + lan2, b20,
			[]string{"- node d", "- link c:eth2--d:eth1", "member c:eth3 removed"}, nil, [][2]string{{"a", "10.0.9.2"}}, nil},
		{"a node's own settings restart it alone", []string{"a", "b", "c:    sysctl:\n      net.ipv4.ip_forward: 0\n"}, ab + "    connector: bridge\n    mtu: 9000\n" + bc + "    mtu: 1400\n" + lan2, b20,
			[]string{"! node c (restarts): sysctl changed"}, []string{"c"}, [][2]string{{"c", "10.0.2.20"}}, nil},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			before := inspect(t, e.state, "live").pids()
			rewriteTopo(t, path, liveTopo(s.nodes, s.links, s.override))
			diff := mustTrellis(t, e.state, "diff", path)
			out := mustTrellis(t, e.state, "up", path)
			for _, want := range s.say {
				if !strings.Contains(out, want) || !strings.Contains(diff, want) {
					t.Errorf("up said:\n%s\ndiff said:\n%s\nwant both to say %q", out, diff, want)
				}
			}
			info := inspect(t, e.state, "live")
			for node, pid := range info.pids() {
				if old, ok := before[node]; ok && old != pid && !slices.Contains(s.restarts, node) {
					t.Errorf("node %s changed process (%d -> %d) but the step does not concern it", node, old, pid)
				}
				if old := before[node]; slices.Contains(s.restarts, node) && old == pid {
					t.Errorf("node %s kept process %d; its settings changed", node, pid)
				}
			}
			checkExactly(t, info)
			for _, p := range s.pings {
				ping(t, e.state, "live", p[0], p[1])
			}
			if s.check != nil {
				s.check(t, info)
			}
			if again := mustTrellis(t, e.state, "diff", path); !strings.Contains(again, "no changes") {
				t.Errorf("diff after up:\n%s", again)
			}
		})
	}
	mustTrellis(t, e.state, "down", "live")
	e.assertClean()
}

// checkExactly checks that the host holds exactly the network's objects: a substrate device for
// every port and connector inspect shows, and no other device named after the network.
func checkExactly(t *testing.T, info *netInfo) {
	t.Helper()
	want := map[string]bool{}
	for _, l := range info.Links {
		for _, ep := range l.Endpoints {
			if ep.Port != "" { // "": a direct link, no device in the root namespace
				want[ep.Port] = true
			}
		}
		if l.Bridge != "" {
			want[l.Bridge] = true
		}
	}
	// The network's devices are where its ports are (its port namespace, by default); none
	// named after it may be in the root namespace then.
	have := devicesNamed(t, info.NetID, false)
	for name := range want {
		if !have[name] {
			t.Errorf("device %s of the network is missing", name)
		}
	}
	for name := range have {
		if !want[name] {
			t.Errorf("device %s is left over", name)
		}
	}
	if hasPortNS(t, info.NetID) {
		for name := range devicesNamed(t, info.NetID, true) {
			t.Errorf("device %s is in the root namespace, not in the network's port namespace", name)
		}
	}
	for _, n := range info.Nodes {
		if !n.Running {
			t.Errorf("node %s is not running", n.Name)
		}
	}
}

// checkLANTable checks what inspect shows of a LAN connector's table: its settings, and at
// most table learnt addresses, each behind a member of the LAN.
func checkLANTable(t *testing.T, l linkInfo, table int, ageing float64) {
	t.Helper()
	if l.LAN == nil || l.LAN.Error != "" {
		t.Fatalf("link %s: no LAN table in inspect (%+v)", l.Name, l.LAN)
	}
	if l.LAN.Table != table || l.LAN.Ageing != ageing {
		t.Errorf("link %s: table %d, ageing %gs; want %d, %gs", l.Name, l.LAN.Table, l.LAN.Ageing, table, ageing)
	}
	if n := len(l.LAN.Entries); n == 0 || n > table {
		t.Errorf("link %s: %d addresses learnt, want 1 to %d: %+v", l.Name, n, table, l.LAN.Entries)
	}
	members := map[string]bool{}
	for _, e := range l.Endpoints {
		members[e.Node+":"+e.Interface] = true
	}
	for _, e := range l.LAN.Entries {
		if !members[e.Member] || e.Idle < 0 || e.Idle > ageing {
			t.Errorf("link %s: entry %+v: member not of the LAN, or idle out of range", l.Name, e)
		}
	}
}

// checkShaperOn checks whether a port has a TBF shaper.
func checkShaperOn(t *testing.T, port string, want bool) {
	t.Helper()
	tbf, tc := tbfOf(t, port)
	if (tbf != nil) != want {
		t.Errorf("port %s: shaper %v, want %v:\n%s", port, tbf != nil, want, tc)
	}
}

// TestLinkDownUp pulls a link's cable and puts it back, for a whole link and for one member of
// a LAN: the node sees NO-CARRIER, traffic stops, and comes back.
func TestLinkDownUp(t *testing.T) {
	e := start(t)
	path := writeTopo(t, liveTopo(abc, ab+bc+lan3, nil))
	mustTrellis(t, e.state, "up", path)
	pids := inspect(t, e.state, "live").pids()
	carrier := func(node, ifname string) bool {
		out := mustExec(t, e.state, "live", node, "ip", "link", "show", ifname)
		return !strings.Contains(out, "NO-CARRIER")
	}
	mustTrellis(t, e.state, "link", "live", "a:eth1--b:eth1", "down")
	if carrier("a", "eth1") || carrier("b", "eth1") {
		t.Error("after link down, a node still has carrier on the link")
	}
	if err := tryPing(t, e.state, "live", "a", "10.0.1.2"); err == nil {
		t.Error("a ping crossed a link that is down")
	}
	// The link names no connector: one veth pair, which stays one pair taken down where the
	// kernel has tcx, and gets the shortbridge's ports where it has not.
	kind := "veth"
	if !dataplane.HasTCX() {
		kind = "shortbridge"
	}
	if out := mustTrellis(t, e.state, "link", "live"); !regexp.MustCompile(`(?m)^a:eth1--b:eth1 +` + kind + ` +down `).MatchString(out) {
		t.Errorf("trellis link does not show the link down, joined by %s:\n%s", kind, out)
	}
	if d := mustTrellis(t, e.state, "diff", path); !strings.Contains(d, "state down -> up") {
		t.Errorf("diff does not show that the file wants the link up:\n%s", d)
	}
	mustTrellis(t, e.state, "link", "live", "a:eth1--b:eth1", "up")
	if !carrier("a", "eth1") || !carrier("b", "eth1") {
		t.Error("after link up, a node has no carrier on the link")
	}
	pingEventually(t, e.state, "live", "a", "10.0.1.2")

	mustTrellis(t, e.state, "link", "live", "lan", "down", "--endpoint", "c:eth3")
	if carrier("c", "eth3") || !carrier("a", "eth2") {
		t.Error("endpoint c:eth3 down: want no carrier on c:eth3 and carrier on a:eth2")
	}
	ping(t, e.state, "live", "a", "10.0.9.2")
	if err := tryPing(t, e.state, "live", "a", "10.0.9.3"); err == nil {
		t.Error("a ping reached a LAN member that is down")
	}
	mustTrellis(t, e.state, "up", path) // the file says up
	pingEventually(t, e.state, "live", "a", "10.0.9.3")
	if got := inspect(t, e.state, "live").pids(); !mapsEqual(got, pids) {
		t.Errorf("node processes changed: %v -> %v", pids, got)
	}
	if _, stderr, err := trellis(t, e.state, "link", "live", "nosuch", "down"); err == nil || !strings.Contains(stderr, "no such link") {
		t.Errorf("link down of an unknown link: %v %s", err, stderr)
	}
	mustTrellis(t, e.state, "down", "live")
	e.assertClean()
}

// TestImpairedLoss: 10 % loss configured on the frames one node sends, measured over 20 000
// echo requests.
func TestImpairedLoss(t *testing.T) {
	e := start(t)
	path := writeTopo(t, liveTopo([]string{"a", "b"}, ab+"    from:\n      a:eth1: {loss: 10%}\n"+lan2, nil))
	mustTrellis(t, e.state, "up", path)
	out, _, _ := execIn(t, e.state, "live", "a", "ping", "-f", "-q", "-c", "20000", "-W", "0.05", "10.0.1.2")
	var sent, got int
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "packets transmitted") {
			fmt.Sscanf(line, "%d packets transmitted, %d received", &sent, &got)
		}
	}
	if sent != 20000 {
		t.Fatalf("ping sent %d, want 20000:\n%s", sent, out)
	}
	loss := 100 * float64(sent-got) / float64(sent)
	t.Logf("configured 10%% loss on a:eth1; measured %.2f%% over %d frames", loss, sent)
	if loss < 9 || loss > 11 {
		t.Errorf("measured %.2f%% loss, want 10 ± 1 %%", loss)
	}
	mustTrellis(t, e.state, "down", "live")
	e.assertClean()
}

// netemKernel tells whether the kernel has the netem qdisc.
func netemKernel() bool {
	la := netlink.NewLinkAttrs()
	la.Name = "trtestnetem"
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "trtestnetemp"}); err != nil {
		return false
	}
	defer netlink.LinkDel(&netlink.Veth{LinkAttrs: la})
	l, err := netlink.LinkByName("trtestnetem")
	if err != nil {
		return false
	}
	q := netlink.NewNetem(netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_ROOT, Handle: netlink.MakeHandle(1, 0)}, netlink.NetemQdiscAttrs{Latency: 1000})
	return netlink.QdiscAdd(q) == nil
}

// pingEventually pings until a reply comes, for up to 5 s: after a link comes back, the
// address resolution that failed while it was down takes up to a second to start again, as on
// a real network.
func pingEventually(t *testing.T, stateDir, network, node, addr string) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if err = tryPing(t, stateDir, network, node, addr); err == nil {
			return
		}
	}
	t.Error(err)
}
