package embedsim

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
)

// Row summarizes one algorithm on one workload over its seeds.
type Row struct {
	Workload, Algorithm string
	Runs                int
	Accept, AcceptLo    float64 // median and minimum over seeds
	AcceptHi            float64 // maximum over seeds
	LRC, LAR            float64 // medians
	Median              float64 // median over seeds of the median solve time
	P99                 float64 // largest 99th percentile over seeds
	CrossBW, Imbalance  float64 // medians (placement)
	Placement           bool
}

// Summarize groups results by workload and algorithm, in first-seen order.
func Summarize(res []*Result) []Row {
	var keys []string
	groups := map[string][]*Result{}
	for _, r := range res {
		k := r.Workload + "\x00" + r.Algorithm
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	var rows []Row
	for _, k := range keys {
		g := groups[k]
		pick := func(f func(*Result) float64) []float64 {
			var xs []float64
			for _, r := range g {
				xs = append(xs, f(r))
			}
			return xs
		}
		acc := pick(func(r *Result) float64 { return r.Accept })
		row := Row{Workload: g[0].Workload, Algorithm: g[0].Algorithm, Runs: len(g),
			Accept: median(acc), AcceptLo: slices.Min(acc), AcceptHi: slices.Max(acc),
			LRC:    median(pick(func(r *Result) float64 { return r.LRC })),
			LAR:    median(pick(func(r *Result) float64 { return r.LAR })),
			Median: median(pick(func(r *Result) float64 { return r.Median })),
			P99:    slices.Max(pick(func(r *Result) float64 { return r.P99 }))}
		if g[0].CrossBW != nil {
			row.Placement = true
			row.CrossBW = median(pick(func(r *Result) float64 { return *r.CrossBW }))
			row.Imbalance = median(pick(func(r *Result) float64 { return *r.Imbalance }))
		}
		rows = append(rows, row)
	}
	return rows
}

// median of xs (mean of the two middle values for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return (s[(len(s)-1)/2] + s[len(s)/2]) / 2
}

// Virne's published WX100 figures (Table 3): RAC %, LRC, LAR, seconds per request.
var Virne = []struct {
	Algorithm           string
	RAC, LRC, LAR, Time float64
}{
	{"PPO-DualGAT", 78.10, 0.74, 14938.60, 0.18},
	{"MCTS", 74.30, 0.44, 12642.27, 3.38},
	{"PPO-MLP", 71.90, 0.65, 12944.40, 0.13},
	{"GA", 71.70, 0.59, 11977.41, 3.22},
	{"PL-Rank", 68.10, 0.67, 11570.27, 0.32},
	{"NRM-Rank", 60.70, 0.52, 9826.94, 0.07},
	{"RW-Rank", 60.10, 0.56, 9396.32, 0.04},
	{"GRC-Rank", 58.90, 0.56, 9269.03, 0.04},
}

// Table is the Markdown table of the results, with Virne's figures beside WX100.
func Table(res []*Result) string {
	var b strings.Builder
	rows := Summarize(res)
	b.WriteString("| workload | algorithm | seeds | acceptance % (min–max) | LRC | LAR | s/request median | s/request p99 (worst seed) | cross-machine bw | load imbalance |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		cross, imb := "", ""
		if r.Placement {
			cross, imb = fmt.Sprintf("%.1f %%", 100*r.CrossBW), fmt.Sprintf("%.2f", r.Imbalance)
		}
		fmt.Fprintf(&b, "| %s | %s (here) | %d | **%.1f** (%.1f–%.1f) | **%.3f** | %.0f | %.4f | %.4f | %s | %s |\n",
			r.Workload, r.Algorithm, r.Runs, 100*r.Accept, 100*r.AcceptLo, 100*r.AcceptHi, r.LRC, r.LAR, r.Median, r.P99, cross, imb)
	}
	if slices.ContainsFunc(rows, func(r Row) bool { return r.Workload == "wx100" }) {
		for _, v := range Virne {
			fmt.Fprintf(&b, "| wx100 | %s (Virne, published) | 1 | %.1f | %.2f | %.0f | %.2f (mean) | | | |\n", v.Algorithm, v.RAC, v.LRC, v.LAR, v.Time)
		}
	}
	return strings.ReplaceAll(b.String(), "grc-rank (here)", "grc-rank (here, baseline)")
}

// WriteMarkdown writes the table and the plots as a Markdown page.
func WriteMarkdown(path string, res []*Result, plots []string) error {
	var b strings.Builder
	b.WriteString("# Embedding simulation\n\n")
	b.WriteString(Table(res))
	for _, p := range plots {
		fmt.Fprintf(&b, "\n![acceptance over time](%s)\n", p)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
