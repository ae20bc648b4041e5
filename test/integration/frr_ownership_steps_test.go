//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// frrOwnMore is what frrOwnTopoWith adds to frrOwnTopo: the MTU of the links p12 and s3 (0:
// the default), a sysctl of h3's own (a change of it restarts h3 next to the routers), and an
// impairment of what r1 sends on p12 (e.g. "loss: 2%").
type frrOwnMore struct {
	mtu       int
	h3Forward bool
	p12Impair string
}

func frrOwnTopoWith(p12Rate, h1Addrs string, h3 bool, more frrOwnMore) string {
	s := frrOwnTopo(p12Rate, h1Addrs, h3)
	if more.mtu != 0 {
		for _, l := range []string{"s3", "p12"} {
			s = strings.Replace(s, "  - {name: "+l+", ", fmt.Sprintf("  - {name: %s, mtu: %d, ", l, more.mtu), 1)
		}
	}
	if more.p12Impair != "" {
		s = strings.Replace(s, "  - {name: p12, ", "  - {name: p12, from: {r1:r1-eth2: {"+more.p12Impair+"}}, ", 1)
	}
	if h3 && more.h3Forward {
		s = strings.Replace(s, "  h3:\n", "  h3:\n    sysctl: {net.ipv4.ip_forward: 1}\n", 1)
	}
	return s
}

// routerOwn gives the routers qdiscs and nft rules of their own (as a user or the router's
// software would), which nodeState compares: r1 a TBF on its p12 interface and a table, r2 a
// TBF on its LAN interface.
func routerOwn(t *testing.T, state string) {
	t.Helper()
	for node, dev := range map[string]string{"r1": "r1-eth2", "r2": "r2-eth1"} {
		mustExec(t, state, "frrown", node, "tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf", "rate", "10gbit", "burst", "1mb", "latency", "100ms")
	}
	mustExec(t, state, "frrown", "r1", "nft", "add table inet r1own; add chain inet r1own in { type filter hook input priority 0; policy accept; }; add rule inet r1own in udp dport 9 counter")
}

// checkCapture records frames of the LAN and of one end of p12, then checks that nothing in
// any node changed: capture reads the ports outside the nodes.
func checkCapture(t *testing.T, state string, base map[string]nodeState, nodes []string) {
	t.Helper()
	dir := t.TempDir()
	for _, c := range [][]string{{"s3"}, {"p12", "--endpoint", "r1:r1-eth2"}} {
		file := filepath.Join(dir, c[0]+".pcapng")
		mustTrellis(t, state, append(append([]string{"capture", "frrown"}, c...), "-c", "3", "-w", file)...)
		if st, err := os.Stat(file); err != nil || st.Size() == 0 {
			t.Errorf("capture %v: no frames recorded (%v)", c, err)
		}
	}
	if diff := sameState(base, readAll(t, state, nodes), true); diff != nil {
		t.Errorf("capture of s3 and p12 changed the nodes:\n%s", strings.Join(diff, "\n"))
	}
}

// checkUnchangedUp runs `up` of an unchanged file while `ip monitor` watches the links and
// addresses inside a router and a node with file-given addresses: between two sentinel
// addresses the test adds and removes, one before the up (which shows the monitor listens)
// and one after it (which shows it saw everything up did), it sees nothing.
func checkUnchangedUp(t *testing.T, state, topo string) {
	t.Helper()
	mons := map[string]*addrMonitor{}
	for _, node := range []string{"r1", "h1"} {
		mons[node] = startAddrMonitor(t, state, node)
		mons[node].mark(t, "10.255.1.1/32") // listening
	}
	out := mustTrellis(t, state, "up", topo)
	for node, m := range mons {
		if other := m.mark(t, "10.255.1.2/32"); len(other) > 0 {
			t.Errorf("up of an unchanged file changed links or addresses in %s:\n%s\nup said:\n%s", node, strings.Join(other, "\n"), out)
		}
		m.stop(t)
	}
}

// addrMonitor is `ip -o monitor link address` running in a node, read line by line.
type addrMonitor struct {
	state, node, pid string
	bg               *bgCmd
}

func startAddrMonitor(t *testing.T, state, node string) *addrMonitor {
	t.Helper()
	bg := startIn(t, state, "frrown", node, "sh", "-c", "echo $$; exec timeout 300 ip -o monitor link address")
	pid, ok := bg.waitLine(30 * time.Second)
	if !ok {
		t.Fatalf("%s: ip monitor did not start within 30 s: %s", node, bg.stderr)
	}
	return &addrMonitor{state: state, node: node, pid: pid, bg: bg}
}

// mark adds sentinel address addr to the node's lo and deletes it, again each second until
// the monitor reports the deletion (within 30 s), and returns the other lines it reported
// before that.
func (m *addrMonitor) mark(t *testing.T, addr string) []string {
	t.Helper()
	var other []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		mustExec(t, m.state, "frrown", m.node, "ip", "addr", "add", addr, "dev", "lo")
		mustExec(t, m.state, "frrown", m.node, "ip", "addr", "del", addr, "dev", "lo")
		for again := time.After(time.Second); ; {
			var l string
			var open bool
			select {
			case l, open = <-m.bg.lines:
			case <-again:
			}
			if l == "" && !open {
				break
			}
			if !strings.Contains(l, " "+addr+" ") {
				other = append(other, l)
			} else if strings.Contains(l, "Deleted ") {
				return other
			}
		}
	}
	t.Fatalf("%s: ip monitor did not report sentinel address %s within 30 s; it reported:\n%s%s", m.node, addr, m.bg.stdout, m.bg.stderr)
	return nil
}

// stop ends the monitor.
func (m *addrMonitor) stop(t *testing.T) {
	t.Helper()
	mustExec(t, m.state, "frrown", m.node, "kill", m.pid)
	m.bg.wait(10 * time.Second)
}

// checkAddressOnly changes h1's file-given addresses after h1's own software set its eth1
// down and its duplicate address detection on: trellis changes the addresses alone, not the
// interface's state or the sysctls it set when it made the interface.
func checkAddressOnly(t *testing.T, state, topo string) {
	t.Helper()
	mustExec(t, state, "frrown", "h1", "sysctl", "-w", "net.ipv6.conf.eth1.accept_dad=1")
	mustExec(t, state, "frrown", "h1", "ip", "link", "set", "eth1", "down")
	rewriteTopo(t, topo, frrOwnTopo("50mbit", "10.0.9.1/24, fd00:9::1/64", false))
	mustTrellis(t, state, "up", topo)
	if out := mustExec(t, state, "frrown", "h1", "ip", "-o", "addr", "show", "eth1"); !strings.Contains(out, "10.0.9.1/24") {
		t.Errorf("h1 eth1: the file's 10.0.9.1/24 is missing:\n%s", out)
	}
	if out := mustExec(t, state, "frrown", "h1", "ip", "-o", "link", "show", "eth1"); strings.Contains(out, ",UP") || strings.Contains(out, "<UP") {
		t.Errorf("h1 eth1 is up again after a change of its addresses; its software had set it down:\n%s", out)
	}
	if got := strings.TrimSpace(mustExec(t, state, "frrown", "h1", "sysctl", "-n", "net.ipv6.conf.eth1.accept_dad")); got != "1" {
		t.Errorf("h1 eth1 accept_dad is %s after a change of its addresses; its software had set 1", got)
	}
	mustExec(t, state, "frrown", "h1", "ip", "link", "set", "eth1", "up")
}

// checkMTULive changes the MTU of p12 (point-to-point) and s3 (the LAN) to 9000: diff says it
// is a live change, every interface keeps its index and addresses (zebra's), the routers'
// qdiscs and rules stay, OSPF comes back within its timers, both ends of each link have the
// new MTU and a 9000-byte packet crosses p12 whole.
func checkMTULive(t *testing.T, state, topo string, nodes []string) {
	t.Helper()
	base := readAll(t, state, nodes)
	rewriteTopo(t, topo, frrOwnTopoWith("50mbit", "10.0.9.1/24, fd00:9::1/64", false, frrOwnMore{mtu: 9000}))
	diff := mustTrellis(t, state, "diff", topo)
	for _, l := range []string{"~ link s3: mtu default -> 9000", "~ link p12: mtu default -> 9000"} {
		if !strings.Contains(diff, l+"\n") {
			t.Errorf("diff says:\n%s\nwant the line %q (a live change: nothing made anew)", diff, l)
		}
	}
	mustTrellis(t, state, "up", topo)
	// ospfd resets an interface whose MTU changed (its neighbours come back at once); the
	// kernel's routes are not compared, as zebra may order an ECMP group's nexthops anew.
	waitState(t, state, base, false, reconverge, "mtu of p12 and s3 default -> 9000")
	for node, ifs := range map[string][]string{"r1": {"r1-eth1", "r1-eth2"}, "r2": {"r2-eth1", "r2-eth2"}, "r3": {"r3-eth0"}} {
		for _, ifname := range ifs {
			if out := mustExec(t, state, "frrown", node, "ip", "-o", "link", "show", ifname); !strings.Contains(out, " mtu 9000 ") {
				t.Errorf("%s %s after the MTU change: %s", node, ifname, out)
			}
		}
	}
	mustExec(t, state, "frrown", "r1", "ping", "-c", "1", "-W", "5", "-M", "do", "-s", "8972", "10.0.12.2")
}
