//go:build integration

package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
	"github.com/vishvananda/netlink"
)

// TestKilledBenchIsCleaned kills a bench with SIGKILL while its setups exist (anonymous
// namespaces, trellis networks with bridges in the root namespace, a user-space relay, and two
// simulated machines running trellis), then runs `trellis-bench clean`, and checks that the host
// is as it was before: network namespaces, devices of the root namespace, node processes, no
// process left that names the bench's work directory, no work directory and no run record.
func TestKilledBenchIsCleaned(t *testing.T) {
	testkit.RequireRoot(t)
	dir := t.TempDir()
	bin := buildBench(t, dir)
	tmp := filepath.Join(dir, "tmp") // the bench's work directory goes here
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(dir, "state")
	before := hostSnapshot(t)

	cmd := exec.Command(bin, "--state-dir", stateDir, "--parts", "forward", "--setups", "shortbridge,bridge,userspace,egre-bridge",
		"--repeat", "1", "--trial", "20s", "--out", filepath.Join(dir, "out"))
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	// A file, not a pipe: the relay's nsenter, which outlives the bench until its node is
	// removed, holds the bench's stderr open.
	logFile, err := os.Create(filepath.Join(dir, "bench.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	logText := func() string { b, _ := os.ReadFile(logFile.Name()); return string(b) }
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cleaned := false
	t.Cleanup(func() { // whatever failed, leave the host as it was
		cmd.Process.Kill()
		cmd.Wait() // reaped: clean leaves a run whose process still exists alone
		if !cleaned {
			exec.Command(bin, "--state-dir", stateDir, "clean").Run()
		}
	})
	deadline := time.Now().Add(3 * time.Minute)
	for !strings.Contains(logText(), "built egre-bridge") {
		if time.Now().After(deadline) {
			t.Fatalf("the bench did not build its setups in 3 minutes:\n%s", logText())
		}
		time.Sleep(50 * time.Millisecond)
	}
	during := hostSnapshot(t)
	prefix := fmt.Sprintf("trbench%d-", cmd.Process.Pid)
	machines := 0
	for _, ns := range during.netns {
		if strings.HasPrefix(ns, prefix) {
			machines++
		}
	}
	if machines != 2 {
		t.Fatalf("the bench runs %d simulated machines named %s*, want 2: %v", machines, prefix, during.netns)
	}
	if len(during.nodes) < len(before.nodes)+7 || len(during.links) <= len(before.links) {
		t.Fatalf("the bench's setups are not all there: %d node processes (%d before), %d devices (%d before)",
			len(during.nodes), len(before.nodes), len(during.links), len(before.links))
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	t.Logf("killed the bench after:\n%s", logText())

	out, err := exec.Command(bin, "--state-dir", stateDir, "clean").CombinedOutput()
	cleaned = true
	if err != nil {
		t.Fatalf("trellis-bench clean: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("removed what bench run %d-", cmd.Process.Pid); !strings.Contains(string(out), want) {
		t.Errorf("trellis-bench clean said %q, want %q", out, want)
	}
	after := hostSnapshot(t)
	for _, c := range []struct {
		what          string
		before, after []string
	}{{"network namespaces", before.netns, after.netns}, {"devices", before.links, after.links}, {"node processes", before.nodes, after.nodes}} {
		if !slices.Equal(c.before, c.after) {
			t.Errorf("%s before the bench: %v\nafter the cleanup: %v", c.what, c.before, c.after)
		}
	}
	if left := processesNaming(tmp); len(left) > 0 {
		t.Errorf("processes of the bench are left: %v", left)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("the work directory is left: %v", left)
	}
	if left, _ := os.ReadDir(filepath.Join(stateDir, "bench")); len(left) > 0 {
		t.Errorf("the run record is left: %v", left)
	}
	out, err = exec.Command(bin, "--state-dir", stateDir, "clean").CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("a second trellis-bench clean: %v, %q; want nothing to do", err, out)
	}
}

// snapshot is what the host holds of what a bench makes.
type snapshot struct {
	netns []string // named network namespaces
	links []string // devices of the root namespace
	nodes []string // trellis node init processes: pid and command line
}

func hostSnapshot(t *testing.T) snapshot {
	t.Helper()
	var s snapshot
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			s.netns = append(s.netns, e.Name())
		}
	}
	links, err := netlink.LinkList()
	for try := 0; err != nil && try < 50; try++ { // a dump interrupted by a change
		links, err = netlink.LinkList()
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		s.links = append(s.links, l.Attrs().Name)
	}
	s.nodes = processesNaming("trellis-node\x00")
	slices.Sort(s.netns)
	slices.Sort(s.links)
	return s
}

// processesNaming lists the processes whose command line contains s, as "pid cmdline".
func processesNaming(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(cmdline, []byte(s)) {
			out = append(out, e.Name()+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	slices.Sort(out)
	return out
}
