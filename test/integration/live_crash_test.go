//go:build integration

package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
)

// TestKillDuringLiveChange interrupts a live change of a running network at several moments,
// with kill -9 and with Ctrl-C (SIGINT): the next up converges to the file (diff shows no
// change, the host holds exactly the file's objects, the new links forward), and down leaves
// nothing.
func TestKillDuringLiveChange(t *testing.T) {
	cases := []struct {
		sig   syscall.Signal
		delay time.Duration
	}{
		{syscall.SIGKILL, 50 * time.Millisecond}, {syscall.SIGKILL, 200 * time.Millisecond},
		{syscall.SIGKILL, 500 * time.Millisecond}, {syscall.SIGINT, 300 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s after %v", c.sig, c.delay), func(t *testing.T) {
			e := start(t)
			path := writeTopo(t, chainTopo("chain", 30))
			mustTrellis(t, e.state, "up", path)
			// The change: 30 more nodes, and a rate on every link.
			grown := chainTopo("chain", 60)
			grown = strings.ReplaceAll(grown, "eth0]\n", "eth0]\n    rate: 50mbit\n")
			rewriteTopo(t, path, grown)
			cmd := exec.Command(trellisBin, "--state-dir", e.state, "up", path)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(c.delay)
			cmd.Process.Signal(c.sig)
			werr := cmd.Wait()
			t.Logf("up got %v after %v: %v; stdout %q stderr %q", c.sig, c.delay, werr, out.String(), errOut.String())
			if c.sig == syscall.SIGINT && werr != nil && !strings.Contains(errOut.String(), "interrupted") {
				t.Errorf("an up stopped by Ctrl-C says %q, want it to say it was interrupted", errOut.String())
			}
			mustTrellis(t, e.state, "up", path)
			if d := mustTrellis(t, e.state, "diff", path); !strings.Contains(d, "no changes") {
				t.Errorf("diff after the second up:\n%s", d)
			}
			info := inspect(t, e.state, "chain")
			if len(info.Nodes) != 60 || len(info.Links) != 59 {
				t.Errorf("after up: %d nodes, %d links, want 60 and 59", len(info.Nodes), len(info.Links))
			}
			checkExactly(t, info)
			ping(t, e.state, "chain", "n58", chainAddr(58, 2))
			mustTrellis(t, e.state, "down", "chain")
			e.assertClean()
		})
	}
}

// TestOSPFRingLive adds a fifth router to the running OSPF ring and takes a ring link down: the
// new router converges with the others, whose daemons keep running untouched, and traffic takes
// the other way round the ring.
func TestOSPFRingLive(t *testing.T) {
	testkit.RequireTool(t, "bird", "scripts/setup.sh installs bird2")
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := start(t)
	ring := filepath.Join(root, "examples/ospf-ring")
	check := func(routers string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(ring, "check.sh"), trellisBin, e.state)
		cmd.Env = append(os.Environ(), "ROUTERS="+routers)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("check.sh (routers %s): %v\n%s", routers, err, out)
		}
	}
	birds := func() map[string]string {
		out := map[string]string{}
		for _, r := range []string{"r1", "r2", "r3", "r4"} {
			out[r] = strings.TrimSpace(mustExec(t, e.state, "ospf-ring", r, "pidof", "bird"))
		}
		return out
	}
	mustTrellis(t, e.state, "up", filepath.Join(ring, "ring.yaml"))
	check("1 2 3 4")
	pids, daemons := inspect(t, e.state, "ospf-ring").pids(), birds()

	began := time.Now()
	out := mustTrellis(t, e.state, "up", filepath.Join(ring, "ring5.yaml"))
	if !strings.Contains(out, "+ node r5") || strings.Contains(out, "restarts") {
		t.Errorf("up ring5.yaml said:\n%s\nwant r5 added and no router restarted", out)
	}
	check("1 2 3 4 5")
	t.Logf("r5 converged with the ring %.1fs after up began", time.Since(began).Seconds())
	after := inspect(t, e.state, "ospf-ring").pids()
	for r, pid := range pids {
		if after[r] != pid {
			t.Errorf("router %s: node process %d -> %d", r, pid, after[r])
		}
	}
	if got := birds(); !mapsEqual(got, daemons) {
		t.Errorf("BIRD daemons changed: %v -> %v", daemons, got)
	}

	// r1 reaches r2's loopback directly over r1-r2; with that link down, round the ring.
	route := func() string { return mustExec(t, e.state, "ospf-ring", "r1", "ip", "route", "get", "10.255.0.2") }
	if r := route(); !strings.Contains(r, "dev eth1") {
		t.Fatalf("r1's route to r2's loopback is not over r1-r2: %s", r)
	}
	cut := time.Now()
	mustTrellis(t, e.state, "link", "ospf-ring", "r1-r2", "down")
	for !strings.Contains(route(), "dev eth2") {
		if time.Since(cut) > 4*time.Second { // OSPF's dead interval in the example
			t.Fatalf("4 s after r1-r2 went down, r1 still routes to r2 by %s", route())
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(cut)
	pingEventually(t, e.state, "ospf-ring", "r1", "10.255.0.2")
	t.Logf("r1-r2 down: r1 routes round the ring after %.2fs", took.Seconds())
	mustTrellis(t, e.state, "link", "ospf-ring", "r1-r2", "up")
	mustTrellis(t, e.state, "down", "ospf-ring")
	e.assertClean()
}
