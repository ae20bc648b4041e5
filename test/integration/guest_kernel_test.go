//go:build integration

package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/testkit"
	"github.com/trellisnet/trellis/test/guestvm"
)

// guestQuick is the quick set run in Debian 12's kernel (6.1) in CI: the tests of this package
// that must pass there. docs/guest-kernel.md says what each covers and how long the set takes.
var guestQuick = []string{
	"TestOSPFRingConverges",
	"TestImpairedLoss",
	"TestKernelCorrupt",
	"TestEscape", // only the probes of guestEscape
	"TestKillDuringUp",
	"TestLANFlood",
}

// guestDelayEnv, set to 1, adds TestDelay (netem, in Debian's kernel) to the quick set: opt-in,
// as its two minutes under TCG would take the set past ten.
const guestDelayEnv = "TRELLIS_GUEST_DELAY"

// guestSkip leaves out the subtests of the quick set that take too long there.
const guestSkip = `TestKillDuringUp/^(100ms|400ms|1\.5s)$`

// guestEscape are the probes of TestEscape run in the guest: those whose outcome depends on the
// kernel's version (docs/guest-kernel.md says why each). The others test what trellis sets up
// the same way on every kernel (namespaces, mounts, limits stable since long before 6.1); each
// probe costs 2 to 10 s there.
var guestEscape = []string{
	"write its /etc",                  // the node's /etc: below 6.15 an attached template
	"read /etc/shadow under its /etc", // the same overlay, unmounted
	"read the copies of /etc",         // the attached template, /run/trellis/etc below 6.15
	"sysrq",                           // 6.1's bind mounts did not inherit /proc's nodev
	"change the init program",         // writes to a running executable: 6.11 changed them
	"load a BPF program",              // BPF in a user namespace: tokens since 6.9
	"raise its pids limit through a cgroup mount of its own", // cgroup v1 in a user namespace
	"exceed its memory limit",                                // cgroup v2's OOM kill inside the node (inspect counts it)
	"reach its neighbour (control)",                          // the rate-capped link forwards
}

// guestRun is the -test.run pattern of the quick set: its tests, TestEscape only with the probes
// of guestEscape. Go matches a test's name level by level, split at every slash, a slash in a
// subtest's name too: a probe's alternative has as many levels as its name.
func guestRun(quick []string) string {
	others := slices.DeleteFunc(slices.Clone(quick), func(n string) bool { return n == "TestEscape" })
	alts := []string{"^(" + strings.Join(others, "|") + ")$"}
	for _, p := range guestEscape {
		levels := []string{"^TestEscape$"}
		for _, l := range strings.Split(strings.ReplaceAll(p, " ", "_"), "/") {
			levels = append(levels, "^"+regexp.QuoteMeta(l)+"$")
		}
		alts = append(alts, strings.Join(levels, "/"))
	}
	return strings.Join(alts, "|")
}

// guestKernelEnv, set to a kernel (6.1, or a release), runs the whole suite in that kernel
// instead of the quick set (scripts/test.sh --kernel 6.1).
const guestKernelEnv = "TRELLIS_GUEST_KERNEL"

// guestRunEnv, with guestKernelEnv, runs only the tests it matches (a -run pattern) there: the
// whole suite takes hours under TCG, a group of tests minutes (docs/guest-kernel.md).
const guestRunEnv = "TRELLIS_GUEST_RUN"

// TestGuestKernel runs integration tests inside Debian 12's own kernel, under QEMU with this
// machine's userspace (test/guestvm), and fails if any fails there. In CI a missing piece (QEMU,
// kmod, the kernel package) fails it; elsewhere it is skipped, saying what to install.
func TestGuestKernel(t *testing.T) {
	if os.Getenv("TRELLIS_IN_GUEST") != "" {
		testkit.Skip(t, "already in a guest: TestGuestKernel starts the guest, from the host")
	}
	quick := guestQuick
	if os.Getenv(guestDelayEnv) == "1" {
		quick = append(quick[:len(quick):len(quick)], "TestDelay")
	}
	kernel, run, skip := "6.1", guestRun(quick), guestSkip
	timeout := 25 * time.Minute // about 10 here; more when the machine is busy
	if k := os.Getenv(guestKernelEnv); k != "" {
		kernel, run, skip, timeout = k, os.Getenv(guestRunEnv), "", 6*time.Hour
	}
	// Within go test's -timeout, which would end this test with the guest still running.
	if d, ok := t.Deadline(); ok && time.Until(d)-time.Minute < timeout {
		timeout = time.Until(d) - time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	k := guestKernel(ctx, t, kernel, os.Getenv(guestKernelEnv) != "")
	dir := t.TempDir()
	guestBuild(ctx, t, map[string][]string{"guestrun": {"build", "-o", filepath.Join(dir, "guestrun"), "./test/guestvm/guestrun"}})
	// The guest runs this test binary itself, from the host's root: building another (static)
	// took 21 s of a quiet run, more under load.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	root, _ := moduleRoot()
	// The tests' own timeout leaves the guest's boot time (20 to 40 s, more under load): a test
	// that hangs is named in the output, which comes back.
	argv := []string{self, "-test.v", "-test.count=1", "-test.timeout", (timeout - time.Minute).String()}
	if run != "" {
		argv = append(argv, "-test.run", run)
	}
	if skip != "" {
		argv = append(argv, "-test.skip", skip)
	}
	res, err := guestvm.Run(ctx, guestvm.Config{
		Kernel: k, Argv: argv, Dir: filepath.Join(root, "test", "integration"),
		Init: filepath.Join(dir, "guestrun"), Timeout: timeout, Console: testLog{t},
		// trellis built by TestMain; a guest under TCG runs it about ten times slower.
		Env: []string{binEnv + "=" + trellisBin, "TRELLIS_IT_TIME_SCALE=10", "TRELLIS_IN_GUEST=1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Linux %s booted in %.1fs; the tests took %.1fs in all", k.Release, res.Boot.Seconds(), res.Total.Seconds())
	if res.ExitCode != 0 {
		t.Fatalf("the tests failed in Linux %s (exit %d)", k.Release, res.ExitCode)
	}
	if skip == "" {
		return // not the quick set
	}
	for _, name := range quick {
		if !regexp.MustCompile(`(?m)^--- PASS: ` + name + ` `).MatchString(res.Output) {
			t.Errorf("%s did not run in the guest", name)
		}
	}
	for _, p := range guestEscape {
		if !strings.Contains(res.Output, "--- PASS: TestEscape/"+strings.ReplaceAll(p, " ", "_")+" (") {
			t.Errorf("TestEscape's probe %q did not run in the guest (renamed?)", p)
		}
	}
}

// guestKernel returns the kernel package of release (6.1, or a full release), fetched into the
// cache the first time. A missing piece (QEMU, kmod, the package) fails the test in CI and when
// the test was asked for (asked); elsewhere it is skipped; either way the message names it and
// what to install.
func guestKernel(ctx context.Context, t *testing.T, release string, asked bool) guestvm.Kernel {
	t.Helper()
	err := guestvm.Check(ctx)
	var k guestvm.Kernel
	if err == nil {
		k, err = guestvm.FetchKernel(ctx, guestvm.DefaultCache, release, testLog{t})
	}
	if errors.Is(err, guestvm.ErrMissing) && !asked {
		testkit.Skipf(t, "%v: scripts/setup.sh installs QEMU and kmod (docs/guest-kernel.md)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// guestBuild runs go with each argument list (name: what it builds) in the module's root,
// statically linked: the guest's init and the test binaries run in the guest.
func guestBuild(ctx context.Context, t *testing.T, bins map[string][]string) {
	t.Helper()
	root, _ := moduleRoot()
	for name, args := range bins {
		c := exec.CommandContext(ctx, goTool(), args...)
		c.Dir, c.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", name, err, out)
		}
	}
}

// testLog writes to the test's log, line by line.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.t.Log(line)
	}
	return len(p), nil
}
