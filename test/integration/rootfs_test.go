//go:build integration

package integration

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// busyboxPath is where the test's root directory keeps busybox: a path the host lacks, so that
// a program found there ran from the node's own root.
const busyboxPath = "/usr/lib/trellis-test/busybox"

// makeBusyboxRoot builds, without network access, a tiny root file system in a new temporary
// directory: the host's static busybox (busybox-static, scripts/setup.sh) at busyboxPath with
// its applets linked in /bin, the directories trellis mounts on, an /etc of its own and a
// marker file.
func makeBusyboxRoot(t *testing.T, marker string) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatalf("no busybox on the host (install busybox-static, see scripts/setup.sh): %v", err)
	}
	root := filepath.Join(t.TempDir(), "root")
	for _, d := range []string{"bin", "dev", "etc", "proc", "run", "sys", "tmp", "var/log", "var/lib", filepath.Dir(busyboxPath[1:])} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, bb, filepath.Join(root, busyboxPath[1:]), 0o755)
	for _, applet := range []string{"sh", "cat", "ls", "touch", "ping", "mount", "umount", "readlink", "grep", "test", "ip", "id", "mknod", "pwd", "kill", "nsenter"} {
		if err := os.Symlink(busyboxPath, filepath.Join(root, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"etc/passwd":      "root:x:0:0:root:/root:/bin/sh\nrootfs-user:x:1000:1000::/tmp:/bin/sh\n",
		"etc/group":       "root:x:0:\n",
		"etc/shadow":      "root:*:19000:0:99999:7:::\n",
		"trellis-marker":  marker + "\n",
		"etc/secret.conf": "only root reads this\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, mode := range map[string]os.FileMode{"etc/shadow": 0o640, "etc/secret.conf": 0o600} {
		if err := os.Chmod(filepath.Join(root, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err == nil {
		_, err = io.Copy(out, in)
		if err2 := out.Close(); err == nil {
			err = err2
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// tree lists the entries under dir with their modes, to tell whether a node changed it.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %v %d", strings.TrimPrefix(path, dir), fi.Mode(), fi.Size()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const rootfsTopo = `name: %s
nodes:
  a:
    rootfs: %s
    addresses: {eth1: [10.0.0.1/24]}
    exec: ["echo started > /tmp/started"]
  b:
    addresses: {eth1: [10.0.0.2/24]}
links:
  - endpoints: [a:eth1, b:eth1]
`

// TestRootfs brings up a node with its own root directory (`rootfs:`) beside a node on the
// host's root: the first sees its directory's files and programs and none of the host's, the
// second the host's; the root is read-only, nosuid and nodev and its private directories
// writable; the nodes reach each other; down leaves nothing, and the directory as it was.
func TestRootfs(t *testing.T) {
	e := start(t)
	marker := "rootfs-" + nonce()
	root := makeBusyboxRoot(t, marker)
	before := tree(t, root)
	const hostOnly = "/usr/bin/python3" // the escape suite runs it: the host has it
	if _, err := os.Stat(hostOnly); err != nil {
		t.Fatalf("the host lacks %s: %v", hostOnly, err)
	}
	if _, err := os.Stat(busyboxPath); err == nil {
		t.Fatalf("the host has %s: the test could not tell the node's busybox from the host's", busyboxPath)
	}
	net := "rootfs"
	mustTrellis(t, e.state, "up", writeTopo(t, fmt.Sprintf(rootfsTopo, net, root)))

	if got := strings.TrimSpace(mustExec(t, e.state, net, "a", "cat", "/trellis-marker")); got != marker {
		t.Errorf("node a's /trellis-marker says %q, want %q", got, marker)
	}
	if out, _, err := execIn(t, e.state, net, "b", "cat", "/trellis-marker"); err == nil {
		t.Errorf("node b, on the host's root, reads the rootfs's marker: %q", out)
	}
	// Programs: busybox from the directory, found on the node's PATH; none of the host's.
	if got := strings.TrimSpace(mustExec(t, e.state, net, "a", "readlink", "/proc/self/exe")); got != busyboxPath {
		t.Errorf("node a ran %s, want the rootfs's %s", got, busyboxPath)
	}
	mustExec(t, e.state, net, "a", "cat", "/tmp/started") // exec: ran with the rootfs's /bin/sh
	if got := strings.TrimSpace(mustExec(t, e.state, net, "a", "pwd")); got != "/" {
		t.Errorf("trellis exec runs in %q, want the node's /", got)
	}
	if _, _, err := execIn(t, e.state, net, "a", "test", "-e", hostOnly); err == nil {
		t.Errorf("node a sees the host's %s", hostOnly)
	}
	mustExec(t, e.state, net, "b", "test", "-e", hostOnly)
	_, errOut, err := execIn(t, e.state, net, "a", "python3", "-c", "1")
	if err == nil || !strings.Contains(errOut, "no such program in the node's file system") {
		t.Errorf("python3 in node a: %v, stderr %q; want a clear error", err, errOut)
	}
	// /etc: the rootfs's, whole (its shadow and root-only files too), writable in the node only.
	if got := mustExec(t, e.state, net, "a", "cat", "/etc/passwd", "/etc/shadow", "/etc/secret.conf"); !strings.Contains(got, "rootfs-user:x:1000") || !strings.Contains(got, "only root reads this") {
		t.Errorf("node a's /etc is not the rootfs's: %q", got)
	}
	mustExec(t, e.state, net, "a", "sh", "-c", "echo x > /etc/probe && echo y > /tmp/probe && echo z > /var/log/probe && cat /etc/probe /tmp/probe")
	ping(t, e.state, net, "a", "10.0.0.2")
	ping(t, e.state, net, "b", "10.0.0.1")

	denied := []struct{ name, cmd string }{
		{"write the root", "touch /probe"},
		{"remount the root read-write", "mount -o remount,rw /"},
		{"unmount /etc to write the rootfs's", "umount /etc"},
		{"reach the copies of /etc", "ls /run/trellis"},
		{"write a kernel.* sysctl", "echo 7 > /proc/sys/kernel/panic"},
		{"mknod a block device", "mknod /tmp/sda b 8 0"},
		{"unmount a private directory", "umount /tmp"},
		{"see host processes", fmt.Sprintf("test $(ls /proc | grep -c '^[0-9]') -gt 20 || kill -0 %d", os.Getpid())},
		{"enter node b's network", fmt.Sprintf("nsenter --net=/proc/%d/ns/net true", inspect(t, e.state, net).node(t, "b").PID)},
	}
	for _, d := range denied {
		out, errOut, err := execIn(t, e.state, net, "a", "sh", "-c", d.cmd)
		if err == nil {
			t.Errorf("%s (%q): allowed in node a: %q", d.name, d.cmd, out)
		}
		if strings.Contains(errOut, "not found") {
			t.Errorf("%s (%q): the tree lacks a program: %s", d.name, d.cmd, errOut)
		}
		t.Logf("%s: %s", d.name, strings.TrimSpace(errOut))
	}
	// The root is mounted read-only, nosuid (the rootfs's set-user-ID programs do not change
	// ids) and nodev.
	mountinfo := mustExec(t, e.state, net, "a", "cat", "/proc/self/mountinfo")
	var rootOpts []string
	for _, line := range strings.Split(mountinfo, "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
			rootOpts = strings.Split(f[5], ",")
		}
	}
	for _, want := range []string{"ro", "nosuid", "nodev"} {
		if !slices.Contains(rootOpts, want) {
			t.Errorf("node a's / is mounted %v, want %s:\n%s", rootOpts, want, mountinfo)
		}
	}

	// Without /bin/sh, `trellis exec` with no command says so.
	if err := os.Rename(filepath.Join(root, "bin/sh"), filepath.Join(root, "bin/sh.away")); err != nil {
		t.Fatal(err)
	}
	_, errOut, err = trellis(t, e.state, "exec", net, "a")
	if err == nil || !strings.Contains(errOut, "/bin/sh: no such program in the node's file system") {
		t.Errorf("trellis exec without /bin/sh in the rootfs: %v, stderr %q; want a clear error", err, errOut)
	}
	if err := os.Rename(filepath.Join(root, "bin/sh.away"), filepath.Join(root, "bin/sh")); err != nil {
		t.Fatal(err)
	}

	mustTrellis(t, e.state, "down", net)
	e.assertClean()
	if after := tree(t, root); !slices.Equal(after, before) {
		t.Errorf("the rootfs changed:\nbefore %v\nafter  %v", before, after)
	}
}

// TestKillDuringUpRootfs kills `up` of a chain of nodes with their own root at several
// moments (while the copy of the root's /etc is made, while nodes start); `down` then leaves
// nothing, and the root as it was.
func TestKillDuringUpRootfs(t *testing.T) {
	for _, delay := range []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, 600 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			e := start(t)
			root := makeBusyboxRoot(t, "kill")
			before := tree(t, root)
			topo := strings.ReplaceAll(chainTopo("rchain", 60), "    addresses:\n", "    rootfs: "+root+"\n    addresses:\n")
			cmd := exec.Command(trellisBin, "--state-dir", e.state, "up", writeTopo(t, topo))
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(delay)
			killProcess(cmd.Process)
			err := cmd.Wait()
			t.Logf("up killed after %v (%v)", delay, err)
			if out, errOut, err := trellis(t, e.state, "down", "rchain"); err != nil {
				t.Errorf("down after a killed up: %v\n%s%s", err, out, errOut)
			}
			e.assertClean()
			if after := tree(t, root); !slices.Equal(after, before) {
				t.Errorf("the rootfs changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}
