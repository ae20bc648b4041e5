//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// TestCPULimit holds node a to half a core (cpu: 0.5) while it runs three busy loops, and node b
// (no limit) keeps the machine busy with its own: a gets 0.5 ± 0.05 cores, measured from its
// cgroup's CPU time over the run, as trellis inspect reports it.
func TestCPULimit(t *testing.T) {
	e := start(t)
	mustTrellis(t, e.state, "up", writeTopo(t, `name: cpulimit
nodes:
  a: {cpu: 0.5}
  b: {}
`))
	const secs = 4
	spin := fmt.Sprintf("for i in 1 2 3; do timeout %d sh -c 'while :; do :; done' & done; wait", secs)
	busy := startIn(t, e.state, "cpulimit", "b", "sh", "-c", spin)
	before, t0 := cpuSeconds(t, e.state, "cpulimit", "a"), time.Now()
	mustExec(t, e.state, "cpulimit", "a", "sh", "-c", spin)
	cores := (cpuSeconds(t, e.state, "cpulimit", "a") - before) / time.Since(t0).Seconds()
	busy.wait(10 * time.Second)
	t.Logf("node a held to cpu: 0.5 used %.3f cores over %d s, with node b busy", cores, secs)
	if math.Abs(cores-0.5) > 0.05 {
		t.Errorf("node a used %.3f cores, want 0.5 ± 0.05", cores)
	}
	mustTrellis(t, e.state, "down", "cpulimit")
	e.assertClean()
}

// cpuSeconds is a node's CPU time as trellis inspect --json reports it.
func cpuSeconds(t *testing.T, stateDir, network, node string) float64 {
	t.Helper()
	var raw struct {
		Nodes []struct {
			Name  string
			Usage *struct {
				CPUSeconds float64 `json:"cpu_seconds"`
			}
		}
	}
	if err := json.Unmarshal([]byte(mustTrellis(t, stateDir, "inspect", network, "--json")), &raw); err != nil {
		t.Fatal(err)
	}
	for _, n := range raw.Nodes {
		if n.Name == node && n.Usage != nil {
			return n.Usage.CPUSeconds
		}
	}
	t.Fatalf("inspect: no usage of node %s", strings.TrimSpace(node))
	return 0
}
