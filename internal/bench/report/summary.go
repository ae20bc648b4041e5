package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/trellisnet/trellis/internal/bench/result"
)

// Summary prints the headline figures of a report.
func Summary(w io.Writer, rep *result.Report) {
	if g := rep.Generator; g != nil {
		fmt.Fprintf(w, "generator ceiling: %s offered, %s at the sink\n", result.Kpps(g.Offered.Median), result.Kpps(g.Delivered.Median))
	}
	for _, s := range rep.Setups {
		ratio := ""
		if s.PeakRatio != nil {
			ratio = fmt.Sprintf(" = %s%% of native (%s–%s%%)", result.FormatF(s.PeakRatio.Median*100, 0), result.FormatF(s.PeakRatio.Min*100, 0), result.FormatF(s.PeakRatio.Max*100, 0))
		}
		fmt.Fprintf(w, "%-12s peak %s%s; zero-loss %s\n", s.Name, result.Kpps(s.Peak.Median), ratio, result.Kpps(s.ZeroLoss.Median))
	}
	for _, c := range rep.CPU {
		fmt.Fprintf(w, "%-12s %.0f ns of CPU per frame\n", c.Setup, c.Net.Median)
	}
	for _, d := range rep.Deploy {
		fmt.Fprintf(w, "%-8s %5d nodes: up %.2fs, down %.2fs\n", d.Tool, d.Nodes, d.Up.Median, d.Down.Median)
	}
	if a := rep.Apply; a != nil {
		for _, s := range a.Steps {
			fmt.Fprintf(w, "up, %d nodes, %-26s %.3fs (%.3f–%.3f)\n", a.Nodes, s.Change+":", s.Seconds.Median, s.Seconds.Min, s.Seconds.Max)
		}
	}
	if im := rep.Impair; im != nil {
		for _, r := range im.Rows {
			fmt.Fprintf(w, "impairment %-14s lost %.2f%%, duplicated %.2f%%, corrupted %.2f%%\n", r.Config+":", r.GotLoss.Median, r.GotDuplicate.Median, r.GotCorrupt.Median)
		}
	}
	for _, e := range rep.Engines {
		fmt.Fprintf(w, "engines %d %-12s FIB %6d: peak %s, reordered %.4f, tcp %.0f Mbit/s\n", e.Engines, e.Dispatch, e.FIBPrefixes, result.Kpps(e.PeakPPS), e.ReorderRatio, e.TCPMbps)
	}
	for _, m := range rep.EnginesMirror {
		fmt.Fprintf(w, "%d routes mirrored into %d engines in %.3fs\n", m.Routes, m.Engines, m.Seconds)
	}
	for _, s := range rep.Scaling {
		fmt.Fprintf(w, "%-12s %5d networks: %s aggregate\n", s.Setup, s.Networks, result.Kpps(s.Aggregate.Median))
	}
	if p := PlotsOf(rep); len(p) > 0 {
		fmt.Fprintf(w, "plots: %s\n", strings.Join(p, ", "))
	}
}
