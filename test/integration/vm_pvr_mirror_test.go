//go:build integration

package integration

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pvrMirrorTopo is h1 -- r -- r2 -- h2 with r a VM node with two engine VMs: h2's subnets are
// not r's, and r reaches them only by the routes its exec adds in its own VM.
const pvrMirrorTopo = `name: pvrm-it
nodes:
  h1:
    addresses:
      eth1: [10.95.1.1/24, fd95:1::1/64]
    exec: ["ip route add default via 10.95.1.2", "ip -6 route add default via fd95:1::2"]
  r:
    kind: vm
    engines: 2
    sysctl: {net.ipv4.ip_forward: "1", net.ipv6.conf.all.forwarding: "1"}
    addresses:
      lo: [10.95.255.1/32]
      eth1: [10.95.1.2/24, fd95:1::2/64]
      eth2: [10.95.2.2/24, fd95:2::2/64]
    exec: ["ip route add 10.95.3.0/24 via 10.95.2.3", "ip -6 route add fd95:3::/64 via fd95:2::3"]
  r2:
    sysctl: {net.ipv4.ip_forward: "1", net.ipv6.conf.all.forwarding: "1"}
    addresses:
      eth1: [10.95.2.3/24, fd95:2::3/64]
      eth2: [10.95.3.3/24, fd95:3::3/64]
    exec: ["ip route add 10.95.1.0/24 via 10.95.2.2", "ip -6 route add fd95:1::/64 via fd95:2::2"]
  h2:
    addresses:
      eth1: [10.95.3.1/24, fd95:3::1/64]
    exec:
      - ip route add default via 10.95.3.3
      - ip -6 route add default via fd95:3::3
      - python3 -c 'import socket; s = socket.socket(2, 2); s.bind(("", 9000)); [s.recv(2048) for _ in iter(int, 1)]' >/dev/null 2>&1 &
links:
  - endpoints: [h1:eth1, r:eth1]
  - endpoints: [r:eth2, r2:eth1]
  - endpoints: [r2:eth2, h2:eth1]
`

// TestVMEnginesMirror checks the mirror of a VM node with engines: the routes r's exec adds
// in its VM (IPv4 and IPv6, to subnets behind another router) reach its engine VMs, which
// forward h1's traffic to h2 on them; a route deleted in r's VM with trellis exec leaves the
// engine VMs (h2 is then unreachable, though the engine VMs still take h1's frames); and a
// helper started anew copies the VM's whole table, made while no helper ran.
func TestVMEnginesMirror(t *testing.T) {
	needQEMU(t)
	e := start(t)
	file := writeTopo(t, pvrMirrorTopo)
	mustTrellis(t, e.state, "up", file)
	if !eventually(10*time.Second, func() bool {
		info, _ := engines(t, e.state, "pvrm-it", "r")
		return info.Mirror.Routes >= 2 && !info.Engines[0].Down && !info.Engines[1].Down
	}) {
		info, _ := engines(t, e.state, "pvrm-it", "r")
		t.Fatalf("10 s after up, the mirror copied %d routes (errors %d, %q), engines %+v; want r's 2 routes and both engine VMs up",
			info.Mirror.Routes, info.Mirror.Errors, info.Mirror.LastError, info.Engines)
	}
	pvrMirrorForwards(t, e.state, "through the routes r's exec made")
	ping(t, e.state, "pvrm-it", "h1", "fd95:3::1")

	// A route deleted in r's VM leaves the engine VMs: they still take h1's frames to h2, and
	// have no route for them.
	routes := pvrMirrorRoutes(t, e.state)
	mustExec(t, e.state, "pvrm-it", "r", "ip", "route", "del", "10.95.3.0/24")
	waitMirrored(t, e.state, routes+1, "the route's deletion")
	before := feRx(t, e.state, "pvrm-it", "r")
	if err := tryPing(t, e.state, "pvrm-it", "h1", "10.95.3.1"); err == nil {
		t.Errorf("h1 reaches h2 after r's route to it was deleted: the engine VMs kept it")
	}
	if d := deltas(t, e.state, "pvrm-it", "r", before, 2); d[0]+d[1] < 2 {
		t.Errorf("after the deletion, h1's pings to h2 reached the engine VMs %v; want them there (and dropped)", d)
	}
	ping(t, e.state, "pvrm-it", "h1", "fd95:3::1") // the IPv6 route stays

	// The mirror's delay: a route added in r's VM, until every engine VM has it.
	routes = pvrMirrorRoutes(t, e.state)
	t0 := time.Now()
	mustExec(t, e.state, "pvrm-it", "r", "ip", "route", "add", "10.95.3.0/24", "via", "10.95.2.3")
	waitMirrored(t, e.state, routes+1, "a route added with trellis exec")
	seen := time.Since(t0) // trellis exec, and the status written every 250 ms
	info, _ := engines(t, e.state, "pvrm-it", "r")
	delays := []int64{info.Mirror.LastMicros}
	for i := range 4 { // a few more samples
		routes = pvrMirrorRoutes(t, e.state)
		mustExec(t, e.state, "pvrm-it", "r", "ip", "route", "add", fmt.Sprintf("10.95.%d.0/24", 10+i), "via", "10.95.2.3")
		waitMirrored(t, e.state, routes+1, "a route added with trellis exec")
		info, _ = engines(t, e.state, "pvrm-it", "r")
		delays = append(delays, info.Mirror.LastMicros)
	}
	t.Logf("mirror delay (agent's watch to every engine VM) of 5 routes added one by one: %v µs, max %d µs; the first from trellis exec to the helper's status: %v",
		delays, info.Mirror.MaxMicros, seen.Round(time.Millisecond))
	pvrMirrorForwards(t, e.state, "through a route added with trellis exec")

	// A helper started anew copies the whole table: the route deleted and made again while
	// no helper ran is in the engine VMs.
	if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	mustExec(t, e.state, "pvrm-it", "r", "ip", "route", "del", "10.95.3.0/24")
	mustExec(t, e.state, "pvrm-it", "r", "ip", "route", "add", "10.95.3.0/24", "via", "10.95.2.3", "metric", "7")
	if !eventually(10*time.Second, func() bool {
		return strings.Contains(mustTrellis(t, e.state, "diff", file), "~ engines r: they are not running")
	}) {
		t.Fatalf("diff after kill -9 of the engines helper:\n%s", mustTrellis(t, e.state, "diff", file))
	}
	mustTrellis(t, e.state, "up", file)
	pvrMirrorForwards(t, e.state, "after the helper was started anew")

	mustTrellis(t, e.state, "down", "pvrm-it")
	e.assertClean()
}

// pvrMirrorForwards checks that 30 UDP frames from h1 to h2 cross r's engine VMs, and that
// h1 pings h2.
func pvrMirrorForwards(t *testing.T, state, when string) {
	t.Helper()
	ping(t, state, "pvrm-it", "h1", "10.95.3.1")
	before := feRx(t, state, "pvrm-it", "r")
	sendUDP(t, state, "pvrm-it", "h1", "10.95.3.1", 41000, 30)
	if d := deltas(t, state, "pvrm-it", "r", before, 30); d[0]+d[1] < 30 {
		t.Errorf("%s: 30 UDP frames from h1 to h2, engine VMs received %v; want all through them", when, d)
	}
	ping(t, state, "pvrm-it", "h1", "10.95.3.1")
}

// pvrMirrorRoutes is the number of route changes r's helper mirrored.
func pvrMirrorRoutes(t *testing.T, state string) int {
	t.Helper()
	info, _ := engines(t, state, "pvrm-it", "r")
	return info.Mirror.Routes
}

// waitMirrored waits until r's helper has mirrored at least want route changes.
func waitMirrored(t *testing.T, state string, want int, what string) {
	t.Helper()
	if !eventually(10*time.Second, func() bool { return pvrMirrorRoutes(t, state) >= want }) {
		info, _ := engines(t, state, "pvrm-it", "r")
		t.Fatalf("%s: 10 s later the mirror copied %d route changes (want %d), errors %d: %s", what,
			info.Mirror.Routes, want, info.Mirror.Errors, info.Mirror.LastError)
	}
}
