//go:build integration

package integration

import (
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
)

// enginesTopo is h1 -- r -- h2, r with three engines; h2 swallows UDP on port 9000 (so it sends
// no ICMP errors back through r, which would count on r's engines).
const enginesTopo = `name: pdp-it
nodes:
  h1:
    addresses:
      eth1: [10.91.1.1/24]
    exec: ["ip route add default via 10.91.1.2"]
  r:
%s
    addresses:
      eth1: [10.91.1.2/24]
      eth2: [10.91.2.2/24]
  h2:
    addresses:
      eth1: [10.91.2.1/24]
    exec:
      - ip route add default via 10.91.2.2
      - python3 -c 'import socket; s = socket.socket(2, 2); s.bind(("", 9000)); [s.recv(2048) for _ in iter(int, 1)]' >/dev/null 2>&1 &
links:
  - endpoints: [h1:eth1, r:eth1]
  - endpoints: [r:eth2, h2:eth1]
`

// TestEnginesDispatch checks a node with three engines: flow dispatch keeps each flow on one
// engine and uses several; a route added in the node reaches every engine and leaves them when
// deleted; weighted dispatch, changed live, splits within 5 % of the weights, its engines'
// shares of cores given out by best fit (two halves on one core, a whole one on another, as
// inspect shows); an engines helper
// killed with kill -9 is seen by diff and started again by up; down leaves nothing.
func TestEnginesDispatch(t *testing.T) {
	e := start(t)
	file := writeTopo(t, strings.Replace(enginesTopo, "%s", "    engines: 3\n    dispatch: flow", 1))
	mustTrellis(t, e.state, "up", file)
	ping(t, e.state, "pdp-it", "h1", "10.91.2.1")

	used := map[int]bool{}
	for sport := 40000; sport < 40012; sport++ {
		before := feRx(t, e.state, "pdp-it", "r")
		sendUDP(t, e.state, "pdp-it", "h1", "10.91.2.1", sport, 200)
		d := deltas(t, e.state, "pdp-it", "r", before, 200)
		on, spread := -1, false
		for i, n := range d {
			switch {
			case n >= 200 && on < 0:
				on = i
			case n > 3: // a copied ARP reply at most
				spread = true
			}
		}
		if on < 0 || spread {
			t.Fatalf("flow from port %d: engines received %v; want its 200 frames all on one", sport, d)
		}
		used[on] = true
	}
	if len(used) < 2 {
		t.Errorf("12 flows all went to engines %v; want them spread", used)
	}

	checkRouteMirrored(t, e)

	// Weighted, changed live: the helper is replaced, the node keeps running.
	_, nodePID := engines(t, e.state, "pdp-it", "r")
	rewriteTopo(t, file, strings.Replace(enginesTopo, "%s",
		"    engines: [{weight: 1, cpus: 0.5}, {weight: 1, cpus: 0.5}, {weight: 2, cpus: 1.0}]\n    dispatch: weighted", 1))
	if out := mustTrellis(t, e.state, "diff", file); !strings.Contains(out, "~ engines r") {
		t.Errorf("diff after changing the engines:\n%s\nwant ~ engines r", out)
	}
	mustTrellis(t, e.state, "up", file)
	info, pid := engines(t, e.state, "pdp-it", "r")
	if pid != nodePID {
		t.Errorf("node r restarted (pid %d -> %d) for a change of its engines", nodePID, pid)
	}
	if es := info.Engines; len(es) != 3 || len(es[0].CPUs) != 1 || len(es[2].CPUs) != 1 || !slices.Equal(es[0].CPUs, es[1].CPUs) ||
		es[2].CPUs[0] == es[0].CPUs[0] || es[0].Share != 0.5 || es[2].Share != 1 {
		t.Errorf("engines asking for 0.5, 0.5 and 1.0 cores: inspect shows %+v; want the halves on one core, the whole on another", es)
	}
	before := feRx(t, e.state, "pdp-it", "r")
	sendUDP(t, e.state, "pdp-it", "h1", "10.91.2.1", 41000, 4000)
	d := deltas(t, e.state, "pdp-it", "r", before, 4000)
	total := float64(d[0] + d[1] + d[2])
	for i, w := range []float64{0.25, 0.25, 0.5} {
		if share := float64(d[i]) / total; math.Abs(share-w) > 0.05*w {
			t.Errorf("weighted 1:1:2: engine %d got %.3f of %v frames; want %.2f ± 5 %%", i, share, total, w)
		}
	}

	// kill -9 of the helper: within 2 s the node forwards by itself, diff sees it, up starts
	// it again.
	info, _ = engines(t, e.state, "pdp-it", "r")
	if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !eventually(5*time.Second, func() bool { return tryPing(t, e.state, "pdp-it", "h1", "10.91.2.1") == nil }) {
		t.Errorf("5 s after kill -9 of its engines, node r does not forward by itself")
	}
	if !eventually(5*time.Second, func() bool {
		return strings.Contains(mustTrellis(t, e.state, "diff", file), "~ engines r: they are not running")
	}) {
		t.Errorf("diff after kill -9 of the engines:\n%s", mustTrellis(t, e.state, "diff", file))
	}
	mustTrellis(t, e.state, "up", file)
	before = feRx(t, e.state, "pdp-it", "r")
	ping(t, e.state, "pdp-it", "h1", "10.91.2.1")
	if d := deltas(t, e.state, "pdp-it", "r", before, 4); d[0]+d[1]+d[2] < 4 {
		t.Errorf("after up restarted the engines, they forwarded %v frames of a ping; want all 4", d)
	}

	mustTrellis(t, e.state, "down", "pdp-it")
	e.assertClean()
}

// checkRouteMirrored adds a route in node r and checks every engine has it within a second,
// then deletes it and checks it leaves them.
func checkRouteMirrored(t *testing.T, e *env) {
	t.Helper()
	info, control := engines(t, e.state, "pdp-it", "r")
	fes := feNamespaces(t, info.PID, control)
	if len(fes) != 3 {
		t.Fatalf("the engines helper holds %d FE namespaces; want 3", len(fes))
	}
	show := func(ns string) string {
		out, err := exec.Command("nsenter", "--net="+ns, "ip", "route", "show", "10.99.0.0/16").CombinedOutput()
		if err != nil {
			t.Fatalf("ip route in %s: %v\n%s", ns, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, op := range []string{"add", "del"} {
		mustExec(t, e.state, "pdp-it", "r", "ip", "route", op, "10.99.0.0/16", "via", "10.91.2.1")
		for _, ns := range fes {
			if !eventually(time.Second, func() bool { return (show(ns) != "") == (op == "add") }) {
				t.Errorf("route %s in r: engine %s shows %q after 1s", op, filepath.Base(ns), show(ns))
			}
		}
	}
}

// TestEnginesOSPF brings up examples/pdp-router: r1, with three engines, between two plain
// routers, all running OSPF (BIRD). OSPF converges through r1's control node, its routes reach
// every engine, and traffic between the hosts crosses the engines.
func TestEnginesOSPF(t *testing.T) {
	testkit.RequireTool(t, "bird", "scripts/setup.sh installs bird2")
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := start(t)
	began := time.Now()
	mustTrellis(t, e.state, "up", filepath.Join(root, "examples/pdp-router/router.yaml"))
	if !eventually(40*time.Second, func() bool { return tryPing(t, e.state, "pdp-router", "h1", "10.1.3.10") == nil }) {
		t.Fatalf("h1 does not reach h2 through r1 40s after up:\n%s", mustExec(t, e.state, "pdp-router", "r1", "ip", "route"))
	}
	t.Logf("h1 reaches h2 %.1fs after up began", time.Since(began).Seconds())
	info, control := engines(t, e.state, "pdp-router", "r1")
	for _, ns := range feNamespaces(t, info.PID, control) {
		out, err := exec.Command("nsenter", "--net="+ns, "ip", "route", "show", "proto", "bird").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "10.1.1.0/24 via 10.0.12.1") || !strings.Contains(string(out), "10.1.3.0/24 via 10.0.13.1") {
			t.Errorf("engine %s: OSPF routes %q (%v); want both host networks", ns, out, err)
		}
	}
	before := feRx(t, e.state, "pdp-router", "r1")
	ping(t, e.state, "pdp-router", "h1", "10.1.3.10")
	if d := deltas(t, e.state, "pdp-router", "r1", before, 4); d[0]+d[1]+d[2] < 4 {
		t.Errorf("r1's engines received %v frames of a ping through r1; want all 4", d)
	}
	if info, _ = engines(t, e.state, "pdp-router", "r1"); info.ToControl == 0 || info.Mirror.Errors != 0 {
		t.Errorf("r1: %d frames to the control node (OSPF hellos at least), %d mirror errors (%s)", info.ToControl, info.Mirror.Errors, info.Mirror.LastError)
	}
	mustTrellis(t, e.state, "down", "pdp-router")
	e.assertClean()
}
