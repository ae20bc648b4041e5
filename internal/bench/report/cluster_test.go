package report

import (
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/bench/result"
)

func TestClusterSection(t *testing.T) {
	full := &result.ClusterResult{Machines: 3, Nodes: 10, LeaseSeconds: 3, Parallel: 8, Load1: 0.4,
		Up: []result.ClusterUp{{Networks: 1, Seconds: 1.234, Writes: 9, WritesPerNetwork: 9},
			{Networks: 100, Seconds: 40.5, Writes: 850, WritesPerNetwork: 8.5}},
		Failover: &result.ClusterFailover{Machine: "m2", Nodes: 340, Networks: 95, Seconds: 7.891, PlacedSeconds: 3.456}}
	quick := *full
	quick.Quick, quick.Load1, quick.Failover = true, 3.2, nil
	for _, tc := range []struct {
		name   string
		c      *result.ClusterResult
		want   []string
		absent []string
	}{
		{"none", nil, nil, []string{"## Cluster"}},
		{"full", full, []string{"## Cluster", "3 simulated machines", "chains\nof 10 nodes", "(8 at once",
			"From a full run, load\naverage 0.4 at its start.", "| 1 | 1.23 | 9 | 9.0 |", "| 100 | 40.50 | 850 | 8.5 |",
			"machine m2 lost", "held 340 nodes of 95\nnetworks", "after 7.89s (lease 3s)", "left the lost machine after 3.46s"}, []string{"loaded"}},
		{"quick, loaded, no failover", &quick, []string{"a --quick run", "average 3.2 at its start: a loaded machine"}, []string{"Failover"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			clusterSection(&b, &result.Report{Cluster: tc.c}, "")
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("missing %q in:\n%s", w, b.String())
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(b.String(), a) {
					t.Errorf("%q in:\n%s", a, b.String())
				}
			}
		})
	}
}
