//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestEtcCopy plants files in the host's /etc (removed after) and checks which of them, and of
// the packages' files, a node's /etc holds: what any unprivileged host user may read, and the
// files a package installed that nobody changed since; not a service's secrets, whoever owns
// them (docs/security.md, "read a host service's secret").
func TestEtcCopy(t *testing.T) {
	for _, tool := range []string{"/usr/lib/frr/zebra", "bird"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (%v): scripts/setup.sh installs frr and bird2, whose stock files this test looks for", tool, err)
		}
	}
	prefix := "/etc/trellis-probe-" + nonce()
	planted := []struct {
		path     string
		mode     os.FileMode
		uid, gid int
		want     bool // in the node's /etc
	}{
		{prefix + ".key", 0o600, 100, 100, false},   // a service's secret (rndc, etcd)
		{prefix + ".conf", 0o640, 0, 100, false},    // for the service's group
		{prefix + ".public", 0o644, 100, 100, true}, // anyone's to read
	}
	for _, p := range planted {
		t.Cleanup(func() { os.Remove(p.path) })
		if err := os.WriteFile(p.path, []byte("secret of "+p.path), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p.path, p.uid, p.gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p.path, p.mode); err != nil {
			t.Fatal(err)
		}
	}
	e := start(t)
	mustTrellis(t, e.state, "up", writeTopo(t, "name: etccopy\nnodes:\n  a: {}\n"))
	for _, p := range planted {
		out, errOut, err := execIn(t, e.state, "etccopy", "a", "cat", p.path)
		if got := err == nil && strings.Contains(out, "secret of"); got != p.want {
			t.Errorf("%s (%v %d:%d): in the node's /etc = %v, want %v\n%s%s", p.path, p.mode, p.uid, p.gid, got, p.want, out, errOut)
		}
	}
	// The packages' stock files, unchanged since they were installed (dpkg's conffiles and
	// bird2's bird.conf, which ucf manages), are in the node as on the host.
	for _, f := range []string{"/etc/frr/daemons", "/etc/frr/vtysh.conf", "/etc/bird/bird.conf", "/etc/bird/envvars"} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatalf("%v: reinstall its package (scripts/setup.sh)", err)
		}
		host, _ := os.ReadFile(f)
		want := fmt.Sprintf("%o %s", fi.Mode().Perm(), strings.TrimSpace(string(mustRun(t, "stat", "-c", "%U:%G", f))))
		if got := strings.TrimSpace(mustExec(t, e.state, "etccopy", "a", "stat", "-c", "%a %U:%G", f)); got != want {
			t.Errorf("%s in the node: %q, want %q as on the host (a file changed since its package installed it is left out by design: reinstall the package)", f, got, want)
		}
		if got := mustExec(t, e.state, "etccopy", "a", "cat", f); got != string(host) {
			t.Errorf("%s in the node differs from the host's", f)
		}
	}
	mustTrellis(t, e.state, "down", "etccopy")
	e.assertClean()
}

func mustRun(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return out
}
