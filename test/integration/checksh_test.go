//go:build integration

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// fakeRing is a trellis that holds a converged OSPF ring whose every `exec` takes 0.2 s: a check
// of six routers (66 commands) takes 13 s, as a check of four does under emulation.
const fakeRing = `#!/bin/sh
[ "$3" = inspect ] && exit 0
sleep 0.2
[ "$7" = birdc ] && echo "10.255.0.9	1	Full/PtP	00:35	eth1	10.0.0.9"
[ "$7" = ip ] && echo "10.255.0.9 via 10.0.0.9 dev eth1"
exit 0
`

// TestCheckScriptWait: examples/ospf-ring/check.sh waits as long as it says. With TIMEOUT=3 and
// a check that takes 13 s, it gives up at 3 s (plus one command) and says so; before, a check
// begun within the wait ran to its end and reported "converged after 99s" after "waiting up to
// 60s" (in a guest under emulation).
func TestCheckScriptWait(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(t.TempDir(), "trellis")
	if err := os.WriteFile(fake, []byte(fakeRing), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "examples/ospf-ring/check.sh"), fake, t.TempDir())
	cmd.Env = append(os.Environ(), "TIMEOUT=3", "ROUTERS=1 2 3 4 5 6")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("check.sh: %v\n%s", err, out)
	}
	t.Logf("check.sh took %v:\n%s", time.Since(start).Round(time.Millisecond), out)
	if !regexp.MustCompile(`(?m)^waiting up to 3s for OSPF to converge\.\.\.$`).Match(out) ||
		!regexp.MustCompile(`(?m)^WARNING: not converged after 3s`).Match(out) {
		t.Errorf("check.sh with TIMEOUT=3 and a 13 s check: want it to wait 3 s and say it did not converge")
	}
	if m := regexp.MustCompile(`converged after (\d+)s`).FindSubmatch(out); m != nil {
		if n, _ := strconv.Atoi(string(m[1])); n > 4 {
			t.Errorf("check.sh reported convergence after %d s, past the 3 s it waits", n)
		}
	}
}
