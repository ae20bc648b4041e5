package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// RequireRoot skips (fails in CI) a test that is not running as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skipf(t, "needs root (uid 0; this is uid %d): run the tests as root, e.g. sudo go test", os.Geteuid())
	}
}

// RequireTool returns the path of the program name, or skips (fails in CI) the test saying how
// to install it (e.g. "apt-get install iperf3", "scripts/setup.sh installs bird2").
func RequireTool(t testing.TB, name, howToInstall string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Skipf(t, "%s is not installed (%v): %s", name, err, howToInstall)
	}
	return path
}

// RequireFile skips (fails in CI) a test when path does not exist, saying how to make it (a
// cached guest image, a library's directory).
func RequireFile(t testing.TB, path, howToGet string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Skipf(t, "%v: %s", err, howToGet)
	}
}

// Feature is a kernel feature a test needs.
type Feature struct {
	Name  string      // what it is called: "tcx"
	Since string      // which kernel has it: "Linux 6.6"
	Has   func() bool // whether this kernel has it
}

// RequireKernel skips (fails in CI) a test when the running kernel lacks one of features.
func RequireKernel(t testing.TB, features ...Feature) {
	t.Helper()
	for _, f := range features {
		if !f.Has() {
			Skipf(t, "this kernel (%s) has no %s: it needs %s or later", kernelRelease(), f.Name, f.Since)
		}
	}
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "release unknown"
	}
	return strings.TrimSpace(string(b))
}

// NotShort skips a test under go test -short, saying what it costs (CI does not use -short).
func NotShort(t testing.TB, cost string) {
	t.Helper()
	if testing.Short() {
		Skipf(t, "%s: not in -short", cost)
	}
}

// TempStateDir returns a path for a state directory of the test's own (under t.TempDir, not
// made yet: state.Open or trellis --state-dir makes it), removed when the test ends.
func TempStateDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "state")
}
