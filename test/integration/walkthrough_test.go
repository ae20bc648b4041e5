//go:build integration

package integration

// The walkthrough of docs/cluster.md, run as the operator would run it: scripts/cluster-walkthrough.sh
// (three simulated machines, a 3-member etcd with one member on each machine, an agent and a
// placer on each, a tenant's chain across them, a pulled cable, a lost machine). The page shows
// the script's steps, so this test keeps the page true; it also checks that losing one machine
// (and the etcd member on it) moves that machine's node and no other: the agents of the other
// machines renew their leases through the members left.

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
)

func TestClusterWalkthrough(t *testing.T) {
	etcd, err := etcdtest.Binary()
	if err != nil {
		t.Fatal(err) // in CI and here alike: scripts/setup.sh builds etcd
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	logs := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "scripts", "cluster-walkthrough.sh"))
	cmd.Env = append(os.Environ(), "TRELLIS="+trellisBin, "TRELLIS_ETCD="+etcd, "LOGS="+logs)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("scripts/cluster-walkthrough.sh (%.1fs):\n%s", time.Since(start).Seconds(), out)
	if err != nil {
		agents, _ := filepath.Glob(filepath.Join(logs, "agent-*.log"))
		for _, l := range agents {
			b, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", filepath.Base(l), b)
		}
		t.Fatalf("the walkthrough of docs/cluster.md failed: %v", err)
	}
}
