//go:build integration

package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFRROSPF brings up the frr-ospf example: stock FRR (Debian's package, started by its own
// frrinit.sh) in four routers, OSPFv2 and OSPFv3 over two areas. It waits until every router
// reaches every loopback over both, checks the adjacencies through vtysh as a user would, and
// that the daemons dropped to user frr as on a real router, under the nodes' seccomp filter.
func TestFRROSPF(t *testing.T) {
	if _, err := exec.LookPath("/usr/lib/frr/zebra"); err != nil {
		t.Fatalf("FRR is not installed (%v): scripts/setup.sh installs frr (a row of docs/security.md)", err)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := start(t)
	began := time.Now()
	mustTrellis(t, e.state, "up", filepath.Join(root, "examples/frr-ospf/frr-ospf.yaml"))
	routers := []string{"r1", "r2", "r3", "r4"}
	loopbacks := []string{"10.255.0.1", "10.255.0.2", "10.255.0.3", "10.255.0.4",
		"fd00:255::1", "fd00:255::2", "fd00:255::3", "fd00:255::4"}
	deadline := time.Now().Add(60 * time.Second)
	for _, r := range routers {
		for _, lo := range loopbacks {
			for {
				out, _, err := execIn(t, e.state, "frr-ospf", r, "ip", "route", "get", lo)
				if err == nil && !strings.Contains(out, "unreachable") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s has no route to %s after 60 s: %s", r, lo, out)
				}
				time.Sleep(250 * time.Millisecond)
			}
		}
	}
	t.Logf("every router has a route to every loopback %.1fs after up began", time.Since(began).Seconds())
	ping(t, e.state, "frr-ospf", "r1", "10.255.0.4")
	mustExec(t, e.state, "frr-ospf", "r1", "ping", "-6", "-c1", "-W2", "fd00:255::4")

	cases := []struct {
		router, command, want string
	}{
		{"r1", "show ip ospf neighbor", "10.255.0.2"},
		{"r2", "show ip ospf neighbor", "10.255.0.3"},
		{"r2", "show ipv6 ospf6 neighbor", "10.255.0.3"},
		{"r2", "show ip ospf", "ABR"},              // area border router between area 0 and 1
		{"r1", "show ip route ospf", "10.255.0.4"}, // inter-area route
		{"r4", "show ipv6 route ospf6", "fd00:255::1/128"},
	}
	for _, c := range cases {
		out := mustExec(t, e.state, "frr-ospf", c.router, "vtysh", "-c", c.command)
		if !strings.Contains(out, c.want) || (strings.Contains(c.command, "neighbor") && !strings.Contains(out, "Full")) {
			t.Errorf("%s: vtysh -c %q: no %q (and Full):\n%s", c.router, c.command, c.want, out)
		}
	}
	ps := mustExec(t, e.state, "frr-ospf", "r1", "ps", "-o", "user=,comm=", "-C", "zebra,ospfd,ospf6d,watchfrr")
	for _, want := range []string{"frr zebra", "frr ospfd", "frr ospf6d", "root watchfrr"} {
		if !strings.Contains(strings.Join(strings.Fields(ps), " "), want) {
			t.Errorf("r1: no process %q:\n%s", want, ps)
		}
	}
	assertFiltered(t, e.state, "frr-ospf", "r1", "zebra", "ospfd", "ospf6d", "watchfrr")
	mustTrellis(t, e.state, "down", "frr-ospf")
	e.assertClean()
}
