//go:build integration

package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/testkit"
)

func TestHundredNetworks(t *testing.T) {
	const n = 100
	e := start(t)
	names := make([]string, n)
	t0 := time.Now()
	for i := range names {
		names[i] = fmt.Sprintf("h%03d", i)
		// Every network has the same nodes and addresses: only the name differs.
		mustTrellis(t, e.state, "up", writeTopo(t, fmt.Sprintf(isoTopo, names[i])))
	}
	took := time.Since(t0)
	t.Logf("%d networks (2 nodes, 1 link each) up one after another in %v (%v per network)", n, took.Round(time.Millisecond), (took / n).Round(time.Microsecond))

	if got := listNetworks(t, e.state); len(got) != n {
		t.Errorf("ls lists %d networks, want %d", len(got), n)
	}
	for _, i := range []int{0, 1, 37, 64, 99} {
		ping(t, e.state, names[i], "a", "10.0.0.2")
		ping(t, e.state, names[i], "b", "fd00::1")
	}

	t0 = time.Now()
	out, errOut, err := trellis(t, e.state, "down", "--all")
	t.Logf("down --all took %v", time.Since(t0).Round(time.Millisecond))
	if err != nil {
		t.Errorf("trellis down --all: %v\nstderr:\n%s", err, errOut)
	}
	if c := strings.Count(out, " is down\n"); c != n {
		t.Errorf("down --all reported %d networks down, want %d", c, n)
	}
	left := listNetworks(t, e.state) // before the check, which may take a while
	e.assertClean()
	if len(left) != 0 {
		t.Errorf("ls lists %d networks after down --all, want none: %v", len(left), left)
	}
}

// A network whose nodes' threads would not fit in what the host's kernel.pid_max leaves free
// is refused before anything is made, with the limit and the fix named: without the check, up
// failed half-way, at the first init whose threads the kernel refused.
func TestUpRefusesWhatPidMaxCannotHold(t *testing.T) {
	pidMax, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(pidMax)))
	if err != nil {
		t.Fatal(err)
	}
	// noderuntime.InitTasks per node: n nodes need more than pid_max holds at all.
	n := max/noderuntime.InitTasks + 1
	if n > 20000 {
		testkit.Skipf(t, "kernel.pid_max is %d: a network too large for it (%d nodes) takes too long to check; lower it (sysctl kernel.pid_max=4096) to run the test", max, n)
	}
	e := start(t)
	_, errOut, err := trellis(t, e.state, "up", writeTopo(t, chainTopo("pidmax", n)))
	if err == nil {
		mustTrellis(t, e.state, "down", "pidmax")
		t.Fatalf("up of %d nodes with kernel.pid_max %d succeeded", n, max)
	}
	for _, want := range []string{"host limit", "network pidmax", fmt.Sprintf("its %d nodes", n),
		fmt.Sprintf("kernel.pid_max is %d", max), "sysctl -w kernel.pid_max="} {
		if !strings.Contains(errOut, want) {
			t.Errorf("error lacks %q:\n%s", want, errOut)
		}
	}
	if got := listNetworks(t, e.state); len(got) != 0 {
		t.Errorf("ls lists %v after the refused up, want nothing", got)
	}
	e.assertClean()
}
