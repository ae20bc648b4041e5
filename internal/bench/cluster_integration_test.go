//go:build integration

package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/testkit"
)

// TestClusterBench runs `trellis-bench --quick --parts cluster` and checks its figures and that
// nothing of it is left: work directory, run record, simulated machines, etcd or agents.
func TestClusterBench(t *testing.T) {
	testkit.RequireRoot(t)
	if _, err := etcdtest.Binary(); err != nil {
		testkit.Skipf(t, "%v: scripts/setup.sh builds etcd (or set TRELLIS_ETCD)", err)
	}
	dir := t.TempDir()
	bin := buildBench(t, dir)
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	out, stateDir := filepath.Join(dir, "out"), filepath.Join(dir, "state")
	cmd := exec.Command(bin, "--state-dir", stateDir, "--quick", "--parts", PartCluster, "--out", out)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	output, err := cmd.CombinedOutput()
	t.Logf("trellis-bench --quick --parts cluster:\n%s", output)
	if err != nil {
		t.Fatal(err)
	}
	// A cleanup that failed leaves on the machine what trellis down would have removed (the
	// nodes' control groups, the networks' uid ranges): 6d36b5a's named the agents' records,
	// TENANT.NETWORK, which down took for files.
	if strings.Contains(string(output), "cleanup:") {
		t.Errorf("the bench's cleanup failed (see its output above)")
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("the bench left its work directory behind: %v", left)
	}
	if left, _ := os.ReadDir(filepath.Join(stateDir, "bench")); len(left) > 0 {
		t.Errorf("the bench left its run record behind: %v", left)
	}
	if ns, err := exec.Command("ip", "netns", "list").Output(); err == nil && strings.Contains(string(ns), fmt.Sprintf("trbench%d-", cmd.Process.Pid)) {
		t.Errorf("the bench left simulated machines behind:\n%s", ns)
	}
	if ps, _ := exec.Command("pgrep", "-f", tmp).Output(); len(ps) > 0 {
		t.Errorf("processes of the bench's work directory left running: %s", ps)
	}
	data, err := os.ReadFile(filepath.Join(out, "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep result.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	c := rep.Cluster
	if c == nil || len(c.Up) != 2 || c.Up[0].Networks != 1 || c.Up[1].Networks != QuickOptions().ClusterNetworks {
		t.Fatalf("cluster result %+v: want ups of 1 and %d networks", c, QuickOptions().ClusterNetworks)
	}
	for _, u := range c.Up {
		if !(u.Seconds > 0) || u.Writes < int64(u.Networks) || u.WritesPerNetwork != float64(u.Writes)/float64(u.Networks) {
			t.Errorf("up of %d networks: %+v, want a time and at least one etcd write per network", u.Networks, u)
		}
	}
	if f := c.Failover; f == nil || f.Machine == "" || f.Nodes < 1 || f.Networks < 1 || !(f.Seconds > 0) {
		t.Errorf("failover %+v: want a machine that held nodes, and a time", c.Failover)
	}
}
