//go:build integration

package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/spec"
)

// directPair checks that interface eth1 of nodes a and b of network are the two ends of one
// veth pair (each one's peer is the other), and returns a's ifindex.
func directPair(t *testing.T, state, network string) string {
	t.Helper()
	read := func(node, file string) string {
		return strings.TrimSpace(mustExec(t, state, network, node, "cat", "/sys/class/net/eth1/"+file))
	}
	aIndex, aPeer := read("a", "ifindex"), read("a", "iflink")
	bIndex, bPeer := read("b", "ifindex"), read("b", "iflink")
	if aPeer != bIndex || bPeer != aIndex {
		t.Errorf("a:eth1 (index %s, peer %s) and b:eth1 (index %s, peer %s) are not one veth pair", aIndex, aPeer, bIndex, bPeer)
	}
	return aIndex
}

// TestDirectLink: a point-to-point link with nothing to enforce is one veth pair between its
// nodes, with no port in the root namespace; it forwards, inspect counts its frames, and
// capture records them. A rate added live re-plugs it to ports (diff and up say so) and the
// rate is enforced; the rate removed makes it one pair again (nothing of the nodes' software
// on it: the re-plugs go without --replug); a re-plug is refused where a node's software added
// an address (checkReplugRefused); `trellis link down` takes it down as one pair, with no
// port (TestDirectLinkDown tests that further). Down leaves nothing.
func TestDirectLink(t *testing.T) {
	needTCX(t)
	e := start(t)
	path := writeTopo(t, rateTopo("direct", ""))
	mustTrellis(t, e.state, "up", path)
	info := inspect(t, e.state, "direct")
	l := info.link(t, "a:eth1--b:eth1")
	if l.Connector != "veth" {
		t.Errorf("connector %q, want veth", l.Connector)
	}
	checkExactly(t, info) // no device of the network in the root namespace
	directPair(t, e.state, "direct")
	ping(t, e.state, "direct", "a", "10.0.0.2")
	for _, ep := range inspect(t, e.state, "direct").link(t, "a:eth1--b:eth1").Endpoints {
		if ep.Port != "" || ep.TxPackets == 0 || ep.RxPackets == 0 || ep.State != "up" {
			t.Errorf("endpoint %s:%s: port %q, %d frames sent, %d received, state %s: want no port, frames both ways, up", ep.Node, ep.Interface, ep.Port, ep.TxPackets, ep.RxPackets, ep.State)
		}
	}
	checkDirectCapture(t, e.state)

	// A rate: the link gets its ports, shaped.
	rewriteTopo(t, path, rateTopo("direct", "    rate: 10mbit\n"))
	if d := mustTrellis(t, e.state, "diff", path); !strings.Contains(d, "connector veth -> shortbridge (a:eth1, b:eth1 to ports re-plugged") {
		t.Errorf("diff with a rate said:\n%s\nwant it to say the link is re-plugged to ports", d)
	}
	mustTrellis(t, e.state, "up", path)
	info = inspect(t, e.state, "direct")
	checkExactly(t, info)
	checkShaper(t, info, 10_000_000, "10Mbit")
	ping(t, e.state, "direct", "b", "10.0.0.1")
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Fatalf("iperf3 is not installed (%v): scripts/setup.sh installs it", err)
	}
	// The median of rateRuns runs, as TestRateAccuracy measures the cap: one short run can
	// carry the shaper's first burst above it.
	res := medianRun(rateRuns, func() *iperfResult { return runIperf(t, e.state, "direct", 3) })
	if got := res.End.SumReceived.BitsPerSecond; onWire(got, 1500) > 10.5e6 {
		t.Errorf("%.0f bit/s over a link capped at 10 Mbit/s", onWire(got, 1500))
	}

	// No rate: one pair again.
	rewriteTopo(t, path, rateTopo("direct", ""))
	if out := mustTrellis(t, e.state, "up", path); !strings.Contains(out, "connector shortbridge -> veth (a:eth1, b:eth1 to one veth pair re-plugged") {
		t.Errorf("up without the rate said:\n%s\nwant it to say the link is re-plugged to one veth pair", out)
	}
	info = inspect(t, e.state, "direct")
	checkExactly(t, info)
	directPair(t, e.state, "direct")
	ping(t, e.state, "direct", "a", "10.0.0.2")

	// A delay set live re-plugs it to ports: trellis link says so, and how to keep the ports.
	out := mustTrellis(t, e.state, "link", "direct", "a:eth1--b:eth1", "set", "delay=5ms")
	for _, want := range []string{"link a:eth1--b:eth1: a:eth1, b:eth1 to ports re-plugged", "names no connector", "`connector: shortbridge` in the file keeps its ports"} {
		if !strings.Contains(out, want) {
			t.Errorf("link set delay=5ms said:\n%s\nwant %q", out, want)
		}
	}
	if l := inspect(t, e.state, "direct").link(t, "a:eth1--b:eth1"); l.Connector != spec.DefaultP2PConnector {
		t.Errorf("after a delay set live, connector %s, want %s", l.Connector, spec.DefaultP2PConnector)
	}
	mustTrellis(t, e.state, "up", path) // the file's: no delay, one pair again
	directPair(t, e.state, "direct")

	checkReplugRefused(t, e.state, path)

	// Taken down: still one pair, no port, down; given back: it forwards.
	mustTrellis(t, e.state, "link", "direct", "a:eth1--b:eth1", "down")
	info = inspect(t, e.state, "direct")
	checkExactly(t, info)
	for _, ep := range info.link(t, "a:eth1--b:eth1").Endpoints {
		if ep.Port != "" || ep.State != "down" {
			t.Errorf("after link down, endpoint %s:%s: port %q state %s, want no port, down", ep.Node, ep.Interface, ep.Port, ep.State)
		}
	}
	if err := tryPing(t, e.state, "direct", "a", "10.0.0.2"); err == nil {
		t.Error("a reaches b over a link that is down")
	}
	mustTrellis(t, e.state, "link", "direct", "a:eth1--b:eth1", "up")
	// The ping while down left a's neighbour entry of b FAILED: the next ping may meet it
	// before ARP asks again.
	pingEventually(t, e.state, "direct", "a", "10.0.0.2")

	mustTrellis(t, e.state, "down", "direct")
	e.assertClean()
}

// checkDirectCapture captures two frames of a direct link while a pings b: an echo request
// sent by a and the reply sent by b.
func checkDirectCapture(t *testing.T, state string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "direct.pcapng")
	capture := exec.Command(trellisBin, "--state-dir", state, "capture", "direct", "a:eth1--b:eth1", "-c", "2", "-w", file, "icmp")
	var errOut strings.Builder
	capture.Stderr = &errOut
	if err := capture.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- capture.Wait() }()
	for i := 0; i < 50; i++ {
		tryPing(t, state, "direct", "a", "10.0.0.2")
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("capture: %v\n%s", err, errOut.String())
			}
			out, err := exec.Command("tcpdump", "-n", "-r", file).CombinedOutput()
			if err != nil {
				t.Fatalf("tcpdump -r: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "10.0.0.1 > 10.0.0.2: ICMP echo request") || !strings.Contains(string(out), "10.0.0.2 > 10.0.0.1: ICMP echo reply") {
				t.Errorf("the capture of the direct link holds:\n%s\nwant a's echo request and b's reply", out)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	capture.Process.Kill()
	<-done
	t.Error("the capture of the direct link recorded no two ICMP frames while a pinged b")
}

// checkReplugRefused: an address a user adds inside node a on the direct link makes every
// live change that would re-plug the link (link set with a delay, up with a rate) refused,
// naming the link, the interface and the address, with nothing changed (same interface, no
// port, the address kept); diff shows the refusal. With --replug, up re-plugs it, says that
// the address went, and the rate is enforced. The rate removed, it is one pair again.
func checkReplugRefused(t *testing.T, state, path string) {
	t.Helper()
	mustExec(t, state, "direct", "a", "ip", "addr", "add", "10.9.9.1/24", "dev", "eth1")
	index := directPair(t, state, "direct")
	refused := func(what string, args ...string) {
		t.Helper()
		_, stderr, err := trellis(t, state, args...)
		for _, want := range []string{"link a:eth1--b:eth1: a:eth1 has 10.9.9.1/24 that its software made", "connector: shortbridge", "--replug"} {
			if err == nil || !strings.Contains(stderr, want) {
				t.Errorf("%s: err %v, stderr:\n%s\nwant it refused, saying %q", what, err, stderr, want)
			}
		}
		if got := directPair(t, state, "direct"); got != index {
			t.Errorf("after the refused %s, a:eth1 has ifindex %s, want %s (not made anew)", what, got, index)
		}
		info := inspect(t, state, "direct")
		checkExactly(t, info)
		if l := info.link(t, "a:eth1--b:eth1"); l.Connector != "veth" {
			t.Errorf("after the refused %s, connector %s, want veth", what, l.Connector)
		}
		if out := mustExec(t, state, "direct", "a", "ip", "-4", "addr", "show", "dev", "eth1"); !strings.Contains(out, "10.9.9.1/24") {
			t.Errorf("after the refused %s, a:eth1 lost the user's address:\n%s", what, out)
		}
	}
	refused("link set", "link", "direct", "a:eth1--b:eth1", "set", "delay=5ms")
	rewriteTopo(t, path, rateTopo("direct", "    rate: 10mbit\n"))
	if d := mustTrellis(t, state, "diff", path); !strings.Contains(d, "x network direct: up refuses this without --replug") ||
		!strings.Contains(d, "a:eth1 has 10.9.9.1/24") {
		t.Errorf("diff with a rate said:\n%s\nwant the refusal up would meet, naming a:eth1's address", d)
	}
	refused("up with a rate", "up", path)

	out := mustTrellis(t, state, "up", "--replug", path)
	if !strings.Contains(out, "re-plugged (--replug): link a:eth1--b:eth1: a:eth1 has 10.9.9.1/24 that its software made; it went") {
		t.Errorf("up --replug said:\n%s\nwant it to say a:eth1's address went", out)
	}
	info := inspect(t, state, "direct")
	checkExactly(t, info)
	checkShaper(t, info, 10_000_000, "10Mbit")
	if out := mustExec(t, state, "direct", "a", "ip", "-4", "addr", "show", "dev", "eth1"); strings.Contains(out, "10.9.9.1") {
		t.Errorf("after up --replug, a:eth1 still has the user's address:\n%s", out)
	}
	rewriteTopo(t, path, rateTopo("direct", ""))
	mustTrellis(t, state, "up", path)
	directPair(t, state, "direct")
}
