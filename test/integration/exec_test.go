//go:build integration

package integration

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Capability numbers (linux/capability.h).
const (
	capNetAdmin  = 12
	capSysModule = 16
	capSysAdmin  = 21
)

func TestExec(t *testing.T) {
	e := start(t)
	path := writeTopo(t, `name: exectest
nodes:
  a:
    addresses:
      eth1: [10.0.0.1/24]
  b:
    addresses:
      eth1: [10.0.0.2/24]
links:
  - endpoints: [a:eth1, b:eth1]
`)
	mustTrellis(t, e.state, "up", path)

	t.Run("hostname", func(t *testing.T) {
		for _, n := range []string{"a", "b"} {
			if got := mustExec(t, e.state, "exectest", n, "hostname"); got != n+"\n" {
				t.Errorf("hostname in node %s printed %q", n, got)
			}
		}
	})

	// A process whose parent ends is reparented to the node's init (PID 1 of the node), and
	// reaped when it ends: no zombie is left (the init ignores SIGCHLD, so the kernel reaps).
	t.Run("orphans reaped", func(t *testing.T) {
		// The sleep outlasts the next exec (seconds under emulation: timeScale).
		sleep := time.Duration(float64(time.Second) * timeScale())
		pid := strings.TrimSpace(mustExec(t, e.state, "exectest", "a", "sh", "-c", "sleep "+strconv.Itoa(int(sleep.Seconds()))+" >/dev/null 2>&1 & echo $!"))
		stat := mustExec(t, e.state, "exectest", "a", "cat", "/proc/"+pid+"/stat")
		if f := strings.Fields(stat[strings.LastIndex(stat, ")")+1:]); len(f) < 2 || f[1] != "1" {
			t.Fatalf("orphan %s: stat %q, want parent 1 (the node's init)", pid, stat)
		}
		deadline := time.Now().Add(10 * sleep)
		for {
			stat, _, err := execIn(t, e.state, "exectest", "a", "cat", "/proc/"+pid+"/stat")
			if err != nil {
				break // gone: reaped
			}
			if time.Now().After(deadline) {
				t.Fatalf("orphan %s still there %s after it started a %s sleep: %s", pid, 10*sleep, sleep, stat)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("exit code", func(t *testing.T) {
		_, _, err := execIn(t, e.state, "exectest", "a", "sh", "-c", "exit 3")
		if c := exitCode(err); c != 3 {
			t.Errorf("exec sh -c 'exit 3': exit code %d (%v), want 3", c, err)
		}
	})

	t.Run("read-only host file system", func(t *testing.T) {
		probe := "/usr/trellis-it-" + nonce()
		t.Cleanup(func() { os.Remove(probe) })
		out, errOut, err := execIn(t, e.state, "exectest", "a", "sh", "-c", "echo x > "+probe)
		if err == nil {
			t.Errorf("writing %s inside a node succeeded: %s", probe, out)
		} else if !strings.Contains(errOut, "Read-only file system") {
			t.Errorf("writing %s inside a node failed with %v: %q, want a read-only file system error", probe, err, errOut)
		}
		if _, err := os.Stat(probe); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists on the host after a node wrote it (stat: %v)", probe, err)
		}
	})

	t.Run("private /etc", func(t *testing.T) {
		file := "/etc/trellis-it-" + nonce()
		t.Cleanup(func() { os.Remove(file) })
		if got := mustExec(t, e.state, "exectest", "a", "sh", "-c", "echo hello from a > "+file+" && cat "+file); got != "hello from a\n" {
			t.Errorf("writing and reading %s in node a gave %q", file, got)
		}
		if got := mustExec(t, e.state, "exectest", "a", "cat", file); got != "hello from a\n" {
			t.Errorf("%s in node a holds %q in a later exec", file, got)
		}
		if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s written in node a is visible on the host (stat: %v)", file, err)
		}
		if out, _, err := execIn(t, e.state, "exectest", "b", "cat", file); err == nil {
			t.Errorf("%s written in node a is visible in node b: %q", file, out)
		}
	})

	t.Run("user namespace", func(t *testing.T) {
		// The node's root is root of its own namespaces only: uid 0 inside is an unprivileged
		// host uid, with every capability over the node (FRR asks for CAP_SYS_ADMIN). What it
		// cannot do on the host is the escape suite's (escape_test.go).
		idmap := strings.Fields(mustExec(t, e.state, "exectest", "a", "cat", "/proc/self/uid_map"))
		if len(idmap) != 3 || idmap[0] != "0" || idmap[1] == "0" || idmap[2] != "65536" {
			t.Errorf("uid_map in the node: %q, want 0 BASE 65536 with BASE > 0", idmap)
		}
		status := mustExec(t, e.state, "exectest", "a", "cat", "/proc/self/status")
		caps, ok := capSet(status, "CapEff")
		if !ok {
			t.Fatalf("no CapEff in /proc/self/status:\n%s", status)
		}
		for _, c := range []struct {
			bit  uint
			name string
		}{{capSysAdmin, "CAP_SYS_ADMIN"}, {capNetAdmin, "CAP_NET_ADMIN"}} {
			if caps&(1<<c.bit) == 0 {
				t.Errorf("CapEff %016x: no %s", caps, c.name)
			}
		}
	})

	t.Run("unknown node", func(t *testing.T) {
		_, errOut, err := execIn(t, e.state, "exectest", "zz", "true")
		if err == nil || !strings.Contains(errOut, "zz") {
			t.Errorf("exec in a node that does not exist: %v, stderr %q; want an error naming it", err, errOut)
		}
	})

	mustTrellis(t, e.state, "down", "exectest")
	e.assertClean()
}

// capSet reads a capability set (e.g. CapBnd) from /proc/PID/status.
func capSet(status, name string) (uint64, bool) {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n, err == nil
		}
	}
	return 0, false
}
