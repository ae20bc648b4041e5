// Package delay holds back the frames a node sends by a link's delay and jitter: through the
// kernel's netem queueing discipline where the kernel has it, and through trellis's own delay
// line (a small process of the substrate holding each frame until its time) where it has not.
// Both draw the jitter from the same distribution tables, so a file means the same on every
// kernel. See docs/architecture.md, "Delay and jitter".
package delay

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
)

// TableScale is what a table entry of one standard deviation (or, for uniform, of the whole
// jitter) is worth: netem's NETEM_DIST_SCALE. A frame's delay is delay + jitter*entry/TableScale.
const TableScale = 8192

// tableSize is the number of entries of a table (as iproute2's: netem takes up to 16384).
const tableSize = 4096

var (
	tablesOnce sync.Once
	tables     map[string][]int16
)

// Table returns the table of a distribution (spec.Distributions; "" is uniform): entries of
// the inverse of its distribution function at evenly spaced probabilities, in TableScale units.
//   - uniform: the jitter spreads evenly over [-jitter, +jitter), netem's own without a table;
//   - normal: the jitter is the standard deviation;
//   - pareto: a Pareto of shape 3 (a long tail of late frames);
//   - paretonormal: 1/4 normal plus 3/4 that Pareto.
//
// Every table but uniform is moved and scaled so that its entries have mean 0 and standard
// deviation 1 exactly (the jitter is the standard deviation of the delay), after clipping to
// the int16 range (4 deviations), which cuts pareto's tail as netem's own tables are cut.
func Table(dist string) []int16 {
	tablesOnce.Do(makeTables)
	if dist == "" {
		dist = "uniform"
	}
	return tables[dist]
}

func makeTables() {
	tables = map[string][]int16{
		"uniform": rounded(fromQuantiles(func(p float64) float64 { return 2*p - 1 }), 0, 1),
		"normal":  standard(fromQuantiles(normalQuantile)),
		"pareto":  standard(fromQuantiles(paretoQuantile)),
	}
	// The mix has no closed inverse: its quantiles come from a large fixed sample.
	r := rand.New(rand.NewPCG(1, 2))
	sample := make([]float64, 1<<20)
	for i := range sample {
		sample[i] = 0.25*normalQuantile(r.Float64()) + 0.75*paretoQuantile(r.Float64())
	}
	slices.Sort(sample)
	tables["paretonormal"] = standard(fromQuantiles(func(p float64) float64 { return sample[int(p*float64(len(sample)))] }))
}

// fromQuantiles makes a table from a quantile function, at the middle of each of tableSize
// equal slices of probability, in units of the jitter.
func fromQuantiles(q func(p float64) float64) []float64 {
	t := make([]float64, tableSize)
	for i := range t {
		t[i] = q((float64(i) + 0.5) / tableSize)
	}
	return t
}

// standard moves and scales a table to mean 0 and standard deviation 1 once clipped to the
// int16 range (clipping narrows it: the scale is found again until it holds), and rounds it.
func standard(t []float64) []int16 {
	mean, sd := meanSD(t)
	scale := 1 / sd
	var out []int16
	for range 50 {
		out = rounded(t, mean, scale)
		m, s := meanSD(toFloat(out))
		if math.Abs(s-1) < 1e-4 && math.Abs(m) < 1e-4 {
			break
		}
		mean += m / scale
		scale /= s
	}
	return out
}

// rounded returns table t, moved by mean and scaled, in TableScale units, clipped to int16.
func rounded(t []float64, mean, scale float64) []int16 {
	out := make([]int16, len(t))
	for i, x := range t {
		v := math.Round((x - mean) * scale * TableScale)
		out[i] = int16(max(math.MinInt16, min(math.MaxInt16, v)))
	}
	return out
}

func toFloat(t []int16) []float64 {
	out := make([]float64, len(t))
	for i, v := range t {
		out[i] = float64(v) / TableScale
	}
	return out
}

func meanSD(t []float64) (mean, sd float64) {
	var sum, sq float64
	for _, x := range t {
		sum += x
		sq += x * x
	}
	mean = sum / float64(len(t))
	return mean, math.Sqrt(sq/float64(len(t)) - mean*mean)
}

func normalQuantile(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }

// paretoQuantile is the quantile of a Pareto distribution of shape 3 and scale 1 (mean 3/2,
// variance 3/4), moved to mean 0 and scaled to variance 1.
func paretoQuantile(p float64) float64 {
	const shape = 3.0
	x := math.Pow(1-p, -1/shape)
	return (x - 1.5) / math.Sqrt(0.75)
}

// Sample returns a frame's delay: delay plus jitter times a random entry of table, as netem
// draws it (without correlation); never below 0.
func Sample(delay, jitter int64, table []int16, r *rand.Rand) int64 {
	if jitter == 0 || len(table) == 0 {
		return delay
	}
	d := delay + jitter*int64(table[r.IntN(len(table))])/TableScale
	return max(d, 0)
}
