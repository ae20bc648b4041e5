//go:build integration

package integration

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/testkit"
)

// userState gives node a's end of the direct link what a routing daemon makes there: an
// address not from the file and a route of protocol bird through it (what decision 15
// keeps, and what made a re-plug refused).
func userState(t *testing.T, state, network string) {
	t.Helper()
	mustExec(t, state, network, "a", "ip", "addr", "add", "10.9.9.1/24", "dev", "eth1")
	mustExec(t, state, network, "a", "ip", "route", "add", "10.77.0.0/24", "via", "10.0.0.2", "dev", "eth1", "proto", "bird")
}

// checkUserState checks that a:eth1 still has what userState gave it.
func checkUserState(t *testing.T, state, network, when string) {
	t.Helper()
	if out := mustExec(t, state, network, "a", "ip", "-4", "addr", "show", "dev", "eth1"); !strings.Contains(out, "10.9.9.1/24") {
		t.Errorf("%s, a:eth1 lost the address its software made:\n%s", when, out)
	}
	if out := mustExec(t, state, network, "a", "ip", "route", "show", "proto", "bird"); !strings.Contains(out, "10.77.0.0/24 via 10.0.0.2 dev eth1") {
		t.Errorf("%s, a lost its bird route through eth1:\n%s", when, out)
	}
}

// checkDirectDown checks that the direct link is down, still the same pair (index: a:eth1's
// ifindex) with no port, and that each end in down shows NO-CARRIER inside its node.
func checkDirectDown(t *testing.T, state, network, index, when string, down ...string) {
	t.Helper()
	if got := directPair(t, state, network); got != index {
		t.Errorf("%s, a:eth1 has ifindex %s, want %s (not made anew)", when, got, index)
	}
	info := inspect(t, state, network)
	checkExactly(t, info)
	l := info.link(t, "a:eth1--b:eth1")
	if l.Connector != "veth" {
		t.Errorf("%s, connector %s, want veth (no port)", when, l.Connector)
	}
	for _, node := range down {
		if out := mustExec(t, state, network, node, "ip", "link", "show", "dev", "eth1"); !strings.Contains(out, "NO-CARRIER") {
			t.Errorf("%s, %s:eth1 inside its node:\n%s\nwant NO-CARRIER", when, node, out)
		}
	}
	for _, ep := range l.Endpoints {
		want := "up"
		if slices.Contains(down, ep.Node) {
			want = "down"
		}
		if ep.Port != "" || ep.State != want {
			t.Errorf("%s, endpoint %s:%s: port %q, state %s; want no port, %s", when, ep.Node, ep.Interface, ep.Port, ep.State, want)
		}
	}
	if err := tryPing(t, state, network, "a", "10.0.0.2"); err == nil {
		t.Errorf("%s, a reaches b over a link that is down", when)
	}
}

// TestDirectLinkDown: a direct link whose interfaces carry what the nodes' software made is
// taken down and up without a re-plug and without --replug: same interfaces (ifindex), no
// port, the software's address and route kept; the nodes see NO-CARRIER, no frame crosses,
// and a node's root that sets its interface up again (and looks for a tc filter to delete)
// still gets no frame across. One endpoint down, and `state: down` in the file, do the same.
// On 5ddc709 the link down was refused (decision 15).
func TestDirectLinkDown(t *testing.T) {
	needTCX(t)
	e := start(t)
	path := writeTopo(t, rateTopo("dlink", "    connector: auto\n"))
	mustTrellis(t, e.state, "up", path)
	index := directPair(t, e.state, "dlink")
	userState(t, e.state, "dlink")
	ping(t, e.state, "dlink", "a", "10.0.0.2")

	if d := mustTrellis(t, e.state, "link", "dlink", "a:eth1--b:eth1", "down"); strings.Contains(d, "re-plug") {
		t.Errorf("link down said:\n%s\nwant no re-plug", d)
	}
	checkDirectDown(t, e.state, "dlink", index, "after link down", "a", "b")
	checkUserState(t, e.state, "dlink", "after link down")

	// The nodes' root lifts what it can see: the interfaces' state. Frames are still dropped.
	for _, node := range []string{"a", "b"} {
		mustExec(t, e.state, "dlink", node, "ip", "link", "set", "dev", "eth1", "mode", "default", "state", "up")
		if _, _, err := execIn(t, e.state, "dlink", node, "tc", "filter", "del", "dev", "eth1", "ingress"); err == nil {
			t.Errorf("node %s's root deleted a tc ingress filter of eth1: trellis's down must not be one", node)
		}
	}
	if out := mustExec(t, e.state, "dlink", "a", "ip", "link", "show", "dev", "eth1"); strings.Contains(out, "NO-CARRIER") {
		t.Errorf("after a's root set eth1 up, it shows:\n%s\nwant it up (the test lifts what a node can)", out)
	}
	if err := tryPing(t, e.state, "dlink", "a", "10.0.0.2"); err == nil {
		t.Error("after the nodes' root set their interfaces up, a reaches b over a link that is down")
	}

	mustTrellis(t, e.state, "link", "dlink", "a:eth1--b:eth1", "up")
	pingEventually(t, e.state, "dlink", "a", "10.0.0.2")
	if got := directPair(t, e.state, "dlink"); got != index {
		t.Errorf("after link up, a:eth1 has ifindex %s, want %s", got, index)
	}
	checkUserState(t, e.state, "dlink", "after link up")

	// One endpoint: b's end goes down, a's stays up; nothing crosses either way.
	mustTrellis(t, e.state, "link", "dlink", "a:eth1--b:eth1", "down", "--endpoint", "b:eth1")
	checkDirectDown(t, e.state, "dlink", index, "after b:eth1 down", "b")
	if out := mustExec(t, e.state, "dlink", "a", "ip", "link", "show", "dev", "eth1"); strings.Contains(out, "NO-CARRIER") {
		t.Errorf("with b:eth1 alone down, a:eth1 shows:\n%s\nwant it up, as with one port down", out)
	}
	mustTrellis(t, e.state, "link", "dlink", "a:eth1--b:eth1", "up", "--endpoint", "b:eth1")
	pingEventually(t, e.state, "dlink", "a", "10.0.0.2")

	// The file's state: down, then up again: the same pair throughout.
	rewriteTopo(t, path, rateTopo("dlink", "    connector: auto\n    state: down\n"))
	if d := mustTrellis(t, e.state, "diff", path); strings.Contains(d, "re-plug") || strings.Contains(d, "refuses") {
		t.Errorf("diff with state: down said:\n%s\nwant no re-plug and no refusal", d)
	}
	mustTrellis(t, e.state, "up", path)
	checkDirectDown(t, e.state, "dlink", index, "after up with state: down", "a", "b")
	checkUserState(t, e.state, "dlink", "after up with state: down")
	rewriteTopo(t, path, rateTopo("dlink", "    connector: auto\n"))
	mustTrellis(t, e.state, "up", path)
	pingEventually(t, e.state, "dlink", "a", "10.0.0.2")

	mustTrellis(t, e.state, "down", "dlink")
	e.assertClean()
}

// pingLoss sends count pings from node a to addr, 10 ms apart, and returns the share lost
// (0 to 1) and the duplicates ping counted.
func pingLoss(t *testing.T, state, network string, count int, addr string) (float64, int) {
	t.Helper()
	out, _, _ := execIn(t, state, network, "a", "ping", "-n", "-q", "-c", strconv.Itoa(count), "-i", "0.01", "-W", "1", addr)
	m := regexp.MustCompile(`(\d+) packets transmitted, (\d+) received(?:, \+(\d+) duplicates)?`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("ping said:\n%s", out)
	}
	sent, _ := strconv.Atoi(m[1])
	got, _ := strconv.Atoi(m[2])
	dups, _ := strconv.Atoi(m[3])
	return 1 - float64(got)/float64(sent), dups
}

// TestDirectLinkImpair: loss and duplication set live on a direct link whose interfaces carry
// what the nodes' software made are enforced on the pair itself, with no re-plug and without
// --replug: measured with real traffic (400 pings, a binomial 30 % within 20-40 %, and
// duplicates), the interfaces kept (ifindex), the software's state kept; removed, nothing is
// lost. A delay still needs ports: it is refused there (decision 15). A link given ports by a
// rate keeps them when the rate goes, where one pair again would take away what a's software
// made. On 5ddc709 the loss was refused.
func TestDirectLinkImpair(t *testing.T) {
	needTCX(t)
	e := start(t)
	path := writeTopo(t, rateTopo("dimp", "    connector: auto\n"))
	mustTrellis(t, e.state, "up", path)
	index := directPair(t, e.state, "dimp")
	userState(t, e.state, "dimp")
	ping(t, e.state, "dimp", "a", "10.0.0.2")

	// Only what a sends is impaired: the echo requests.
	out := mustTrellis(t, e.state, "link", "dimp", "a:eth1--b:eth1", "set", "loss=30%", "--endpoint", "a:eth1")
	if strings.Contains(out, "re-plug") {
		t.Errorf("link set said:\n%s\nwant no re-plug", out)
	}
	if got := directPair(t, e.state, "dimp"); got != index {
		t.Errorf("after link set loss, a:eth1 has ifindex %s, want %s (not made anew)", got, index)
	}
	if l := inspect(t, e.state, "dimp").link(t, "a:eth1--b:eth1"); l.Connector != "veth" {
		t.Errorf("after link set loss, connector %s, want veth", l.Connector)
	}
	lost, _ := pingLoss(t, e.state, "dimp", 400, "10.0.0.2")
	t.Logf("loss=30%% on a direct link: %.1f%% of 400 pings lost", 100*lost)
	if lost < 0.20 || lost > 0.40 {
		t.Errorf("%.1f%% of pings lost with loss=30%% on a:eth1, want 20-40%%", 100*lost)
	}
	// inspect counts them where they were dropped: on b's end, for a:eth1's impairment.
	if ep := inspect(t, e.state, "dimp").link(t, "a:eth1--b:eth1").Endpoints[0]; ep.ImpairDrops < uint64(lost*400) {
		t.Errorf("inspect: a:eth1's impairment dropped %d frames, want at least the %.0f pings lost", ep.ImpairDrops, lost*400)
	}

	mustTrellis(t, e.state, "link", "dimp", "a:eth1--b:eth1", "set", "duplicate=50%", "--endpoint", "b:eth1")
	mustTrellis(t, e.state, "link", "dimp", "a:eth1--b:eth1", "set", "--endpoint", "a:eth1")
	lost, dups := pingLoss(t, e.state, "dimp", 200, "10.0.0.2")
	t.Logf("duplicate=50%% on b:eth1: %d duplicates of 200 replies, %.1f%% lost", dups, 100*lost)
	if dups < 60 || dups > 140 || lost > 0.02 {
		t.Errorf("%d duplicates and %.1f%% lost of 200 pings with duplicate=50%% on b:eth1 alone, want 60-140 and none lost", dups, 100*lost)
	}
	if ep := inspect(t, e.state, "dimp").link(t, "a:eth1--b:eth1").Endpoints[1]; ep.Duplicated < uint64(dups) {
		t.Errorf("inspect: b:eth1's impairment duplicated %d frames, want at least the %d duplicate replies", ep.Duplicated, dups)
	}
	mustTrellis(t, e.state, "link", "dimp", "a:eth1--b:eth1", "set")
	if lost, dups := pingLoss(t, e.state, "dimp", 100, "10.0.0.2"); lost > 0.02 || dups > 0 {
		t.Errorf("with the impairments removed, %.1f%% lost and %d duplicates, want none", 100*lost, dups)
	}
	if got := directPair(t, e.state, "dimp"); got != index {
		t.Errorf("after the impairments, a:eth1 has ifindex %s, want %s", got, index)
	}
	checkUserState(t, e.state, "dimp", "after the impairments")

	// A delay needs ports: refused while a's software has state there.
	_, stderr, err := trellis(t, e.state, "link", "dimp", "a:eth1--b:eth1", "set", "delay=5ms")
	if err == nil || !strings.Contains(stderr, "--replug") {
		t.Errorf("link set delay on the direct link: err %v, stderr:\n%s\nwant it refused (a delay needs ports)", err, stderr)
	}

	// A rate gives it ports (the flap accepted); the rate removed, the link keeps its ports
	// rather than be refused for going back to one pair over what a's software made again.
	rewriteTopo(t, path, rateTopo("dimp", "    connector: auto\n    rate: 10mbit\n"))
	mustTrellis(t, e.state, "up", "--replug", path)
	userState(t, e.state, "dimp")
	rewriteTopo(t, path, rateTopo("dimp", "    connector: auto\n"))
	if d := mustTrellis(t, e.state, "diff", path); strings.Contains(d, "refuses") || strings.Contains(d, "re-plug") {
		t.Errorf("diff without the rate said:\n%s\nwant no refusal and no re-plug (the link keeps its ports)", d)
	}
	if out := mustTrellis(t, e.state, "up", path); !strings.Contains(out, "link a:eth1--b:eth1 keeps its ports: one veth pair again would take away 10.9.9.1/24") {
		t.Errorf("up without the rate said:\n%s\nwant it to say the link keeps its ports", out)
	}
	if l := inspect(t, e.state, "dimp").link(t, "a:eth1--b:eth1"); l.Connector != "shortbridge" || l.Rate != "" {
		t.Errorf("after up without the rate, connector %s rate %q, want shortbridge with no rate", l.Connector, l.Rate)
	}
	checkUserState(t, e.state, "dimp", "after up without the rate")
	ping(t, e.state, "dimp", "a", "10.0.0.2")
	mustTrellis(t, e.state, "down", "dimp")
	e.assertClean()
}

// needTCX skips a test of a direct link taken down or impaired as one veth pair on a kernel
// without tcx, where such a link goes to ports instead (docs/design.md, decision 5).
func needTCX(t *testing.T) {
	t.Helper()
	if !dataplane.HasTCX() {
		testkit.Skip(t, "this kernel has no tcx (Linux 6.6 or later): here a direct link taken down or impaired goes to ports (re-plugged), as diff and a refused re-plug say (TestReplugWhy); run the test on Linux 6.6 or later")
	}
}
