//go:build integration

package integration

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const devTopo = `name: %s
nodes:
  a: {addresses: {eth1: [10.0.0.1/24]}}
  r: {rootfs: %s, addresses: {eth1: [10.0.0.2/24]}}
links:
  - endpoints: [a:eth1, r:eth1]
`

// nodeDev is what a node's /dev holds (ls -A), in a node on the host's root as in one with
// `rootfs:`.
const nodeDev = "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero"

// TestNodeDev: a node's /dev is its own, with a few devices and a devpts instance of its own.
// On b3b80eb it was the host's /dev, every device of the host listed in it, and a pty a node
// opened was one of the host's devpts instance, which a node could use up.
func TestNodeDev(t *testing.T) {
	e := start(t)
	net := "nodedev"
	mustTrellis(t, e.state, "up", writeTopo(t, fmt.Sprintf(devTopo, net, makeBusyboxRoot(t, "dev-"+nonce()))))
	disks, _ := filepath.Glob("/sys/block/*")
	if len(disks) == 0 {
		t.Fatal("the host has no block device in /sys/block")
	}
	for _, node := range []string{"a", "r"} {
		if got := strings.Join(strings.Fields(mustExec(t, e.state, net, node, "ls", "-A", "/dev")), " "); got != nodeDev {
			t.Errorf("ls -A /dev in node %s: %s, want %s", node, got, nodeDev)
		}
		disk := "/dev/" + filepath.Base(disks[0])
		if out, _, err := execIn(t, e.state, net, node, "ls", "-l", disk); err == nil {
			t.Errorf("the host's disk %s has a path in node %s: %s", disk, node, out)
		}
		mustExec(t, e.state, net, node, "sh", "-c", "echo x > /dev/null && test -c /dev/urandom && test -c /dev/zero && test -d /dev/pts && ! echo x 2>/dev/null > /dev/full")
	}

	// A pty the node opens is in its own devpts instance, not in the host's.
	var host syscall.Stat_t
	if err := syscall.Stat("/dev/pts", &host); err != nil {
		t.Fatal(err)
	}
	out := mustExec(t, e.state, net, "a", "python3", "-c", `import os
m, s = os.openpty()
print(os.ttyname(s), os.fstat(s).st_dev, os.stat("/dev/pts").st_dev)`)
	f := strings.Fields(out)
	if len(f) != 3 || !strings.HasPrefix(f[0], "/dev/pts/") || f[1] != f[2] || f[1] == strconv.FormatUint(host.Dev, 10) {
		t.Errorf("a pty opened in node a: %q (name, its devpts, the node's /dev/pts), want one of the node's /dev/pts, not the host's (%d)", out, host.Dev)
	}

	// A node has at most 256 ptys at once (the loop stops at 300: it must not use up the host's).
	out = mustExec(t, e.state, net, "a", "python3", "-c", `import os
n = 0
try:
    while n < 300:
        os.openpty()
        n += 1
except OSError:
    pass
print(n)`)
	if got := strings.TrimSpace(out); got != "256" {
		t.Errorf("node a opened %s ptys, want 256 at most", got)
	}
	mustTrellis(t, e.state, "down", net)
	e.assertClean()
}
