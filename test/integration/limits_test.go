//go:build integration

package integration

import (
	"encoding/json"
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
	// Both nodes spin for 6 s; a's CPU time is sampled 1 s and 5 s in, well inside the run,
	// each sample timed at the middle of the inspect that reads it.
	spin := "for i in 1 2 3; do timeout 6 sh -c 'while :; do :; done' & done; wait"
	busyB := startIn(t, e.state, "cpulimit", "b", "sh", "-c", spin)
	busyA := startIn(t, e.state, "cpulimit", "a", "sh", "-c", spin)
	sample := func() (float64, time.Time) {
		t0 := time.Now()
		cpu := cpuSeconds(t, e.state, "cpulimit", "a")
		return cpu, t0.Add(time.Since(t0) / 2)
	}
	time.Sleep(time.Second)
	cpu1, t1 := sample()
	time.Sleep(4 * time.Second)
	cpu2, t2 := sample()
	cores := (cpu2 - cpu1) / t2.Sub(t1).Seconds()
	busyA.wait(10 * time.Second)
	busyB.wait(10 * time.Second)
	t.Logf("node a held to cpu: 0.5 used %.3f cores over %.1f s, with node b busy", cores, t2.Sub(t1).Seconds())
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
