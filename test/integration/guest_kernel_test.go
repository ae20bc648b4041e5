//go:build integration

package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	"TestEscape",
	"TestKillDuringUp",
	"TestLANFlood",
}

// guestDelayEnv, set to 1, adds TestDelay (netem, in Debian's kernel) to the quick set: opt-in,
// as its two minutes under TCG would take the set past ten.
const guestDelayEnv = "TRELLIS_GUEST_DELAY"

// guestSkip leaves out the subtests of the quick set that take too long there.
const guestSkip = `TestKillDuringUp/^(100ms|400ms|1\.5s)$`

// guestKernelEnv, set to a kernel (6.1, or a release), runs the whole suite in that kernel
// instead of the quick set (scripts/test.sh --kernel 6.1).
const guestKernelEnv = "TRELLIS_GUEST_KERNEL"

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
	kernel, run := "6.1", "^("+strings.Join(quick, "|")+")$"
	timeout := 25 * time.Minute // about 10 here; more when the machine is busy
	if k := os.Getenv(guestKernelEnv); k != "" {
		kernel, run, timeout = k, "", 6*time.Hour
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := guestvm.Check(ctx)
	var k guestvm.Kernel
	if err == nil {
		k, err = guestvm.FetchKernel(ctx, guestvm.DefaultCache, kernel, testLog{t})
	}
	if errors.Is(err, guestvm.ErrMissing) {
		testkit.Skipf(t, "%v: scripts/setup.sh installs QEMU and kmod (docs/guest-kernel.md)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bins := map[string][]string{
		"guestrun": {"build", "-o", filepath.Join(dir, "guestrun"), "./test/guestvm/guestrun"},
		"it.test":  {"test", "-c", "-tags", "integration", "-o", filepath.Join(dir, "it.test"), "./test/integration"},
	}
	root, _ := moduleRoot()
	for name, args := range bins {
		c := exec.CommandContext(ctx, goTool(), args...)
		c.Dir, c.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", name, err, out)
		}
	}
	argv := []string{filepath.Join(dir, "it.test"), "-test.v", "-test.count=1", "-test.timeout", timeout.String()}
	if run != "" {
		argv = append(argv, "-test.run", run, "-test.skip", guestSkip)
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
	for _, name := range quick {
		if run != "" && !regexp.MustCompile(`(?m)^--- PASS: `+name+` `).MatchString(res.Output) {
			t.Errorf("%s did not run in the guest", name)
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
