//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOSPFRingConverges brings up the OSPF ring example (four BIRD routers) and checks, with the
// example's own check script, that OSPF converges and every router reaches every loopback, BIRD
// running under the nodes' seccomp filter.
func TestOSPFRingConverges(t *testing.T) {
	if _, err := exec.LookPath("bird"); err != nil {
		t.Fatalf("BIRD is not installed (%v): scripts/setup.sh installs bird2 (a row of docs/security.md)", err)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := start(t)
	began := time.Now()
	mustTrellis(t, e.state, "up", filepath.Join(root, "examples/ospf-ring/ring.yaml"))
	check := exec.Command(filepath.Join(root, "examples/ospf-ring/check.sh"), trellisBin, e.state)
	check.Env = append(os.Environ(), fmt.Sprintf("TIMEOUT=%.0f", 60*timeScale())) // its wait, as the machine's speed allows
	out, err := check.CombinedOutput()
	if err != nil {
		t.Fatalf("check.sh: %v\n%s", err, out)
	}
	t.Logf("converged %.1fs after up began:\n%s", time.Since(began).Seconds(), strings.TrimSpace(string(out)))
	assertFiltered(t, e.state, "ospf-ring", "r1", "bird")
	mustTrellis(t, e.state, "down", "ospf-ring")
	e.assertClean()
}
