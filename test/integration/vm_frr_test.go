//go:build integration

package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
)

// TestVMFRR brings up the vm-mixed FRR example: stock FRR, started by Debian's frrinit.sh, in
// a VM router (its guest image holds the host's FRR) and a container router, OSPFv2 and OSPFv3
// over one link. Each learns the other's loopbacks, the VM's adjacencies are Full through
// vtysh in the guest, and the VM's daemons dropped to user frr.
func TestVMFRR(t *testing.T) {
	needQEMU(t)
	testkit.RequireTool(t, "/usr/lib/frr/zebra", "scripts/setup.sh installs frr")
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := start(t)
	registerNetwork("frr-mixed")
	began := time.Now()
	mustTrellis(t, e.state, "up", filepath.Join(root, "examples/vm-mixed/frr.yaml"))
	up := time.Since(began)
	routes := []struct{ router, to string }{
		{"r1", "10.255.0.2"}, {"r1", "fd00:255::2"}, {"r2", "10.255.0.1"}, {"r2", "fd00:255::1"},
	}
	deadline := time.Now().Add(90 * time.Second)
	for _, r := range routes {
		for {
			out, _, err := execIn(t, e.state, "frr-mixed", r.router, "ip", "route", "get", r.to)
			if err == nil && !strings.Contains(out, "unreachable") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s has no route to %s 90 s after up: %s", r.router, r.to, out)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	t.Logf("up in %.1fs, both routers reach each other's loopbacks %.1fs after up began", up.Seconds(), time.Since(began).Seconds())
	mustExec(t, e.state, "frr-mixed", "r2", "ping", "-c1", "-W5", "-I", "10.255.0.2", "10.255.0.1")
	for _, c := range []struct{ command, want string }{
		{"show ip ospf neighbor", "10.255.0.2"},
		{"show ipv6 ospf6 neighbor", "10.255.0.2"},
		{"show ip route ospf", "10.255.0.2/32"},
	} {
		out, errOut, err := execIn(t, e.state, "frr-mixed", "r1", "vtysh", "-c", c.command)
		if err != nil || !strings.Contains(out, c.want) || (strings.Contains(c.command, "neighbor") && !strings.Contains(out, "Full")) {
			t.Errorf("r1 (vm): vtysh -c %q: %v, no %q (and Full):\n%s", c.command, err, c.want, out)
		}
		if errOut != "" {
			t.Errorf("r1 (vm): vtysh -c %q wrote to stderr: %q", c.command, errOut)
		}
	}
	ps := strings.Join(strings.Fields(mustExec(t, e.state, "frr-mixed", "r1", "ps", "-o", "user,comm")), " ")
	for _, want := range []string{"frr zebra", "frr ospfd", "frr ospf6d", "root watchfrr"} {
		if !strings.Contains(ps, want) {
			t.Errorf("r1 (vm): no process %q:\n%s", want, ps)
		}
	}
	mustTrellis(t, e.state, "down", "frr-mixed")
	e.assertClean()
}
