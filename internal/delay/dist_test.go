package delay

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestTables checks each table's mean and standard deviation in TableScale units, and that
// it rises: the tables are the distributions the jitter is documented to follow.
func TestTables(t *testing.T) {
	for _, tc := range []struct {
		dist     string
		mean, sd float64 // in units of the jitter
	}{
		{"uniform", 0, 1 / math.Sqrt(3)},
		{"normal", 0, 1},
		{"pareto", 0, 1},
		{"paretonormal", 0, 1},
	} {
		tab := Table(tc.dist)
		if len(tab) != tableSize {
			t.Fatalf("%s: %d entries", tc.dist, len(tab))
		}
		var sum, sq float64
		for i, v := range tab {
			if i > 0 && v < tab[i-1] {
				t.Fatalf("%s: entry %d (%d) below entry %d (%d)", tc.dist, i, v, i-1, tab[i-1])
			}
			x := float64(v) / TableScale
			sum += x
			sq += x * x
		}
		mean := sum / tableSize
		sd := math.Sqrt(sq/tableSize - mean*mean)
		const tol = 0.001
		if math.Abs(mean-tc.mean) > tol || math.Abs(sd-tc.sd) > tol {
			t.Errorf("%s: mean %.4f sd %.4f, want %.4f and %.4f (±%.3f)", tc.dist, mean, sd, tc.mean, tc.sd, tol)
		}
	}
	if got := Table(""); &got[0] != &Table("uniform")[0] {
		t.Error(`Table("") is not the uniform table`)
	}
}

func TestSample(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	if d := Sample(10e6, 0, Table("normal"), r); d != 10e6 {
		t.Errorf("no jitter: %d", d)
	}
	lo, hi := int64(math.MaxInt64), int64(0)
	for range 100000 {
		d := Sample(10e6, 2e6, Table("uniform"), r)
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 8e6 || hi >= 12e6 || lo > 8.01e6 || hi < 11.99e6 {
		t.Errorf("uniform 10ms ± 2ms spans [%d, %d]", lo, hi)
	}
	if d := Sample(1e6, 10e6, Table("normal"), r); d < 0 {
		t.Errorf("negative delay %d", d)
	}
}
