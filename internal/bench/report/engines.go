package report

import (
	"fmt"
	"strings"

	"github.com/trellisnet/trellis/internal/bench/result"
)

// enginesSection is the parallel forwarding engines part (PdP paper, figures 7, 11 and 12,
// tables 1 to 3).
func enginesSection(b *strings.Builder, rep *result.Report, _ string) {
	if len(rep.Engines) == 0 {
		return
	}
	b.WriteString("## Parallel forwarding engines\n\n")
	fmt.Fprintf(b, `Node nut between src and sink, as a plain node or with 1 to 3 forwarding engines (each
engine's receive processing steered to CPU i mod %d) under each dispatch (weighted: 1:2 and
1:1:2). Peak: 64-byte UDP frames over 64 flows from a packet socket in src, as fast as it sends,
counted on the sink's interface (median of the repetitions); per engine: the frames each engine
received in those trials. TCP: one iperf3 stream. Reordered: RFC 4737 reordered ratio of one
flow of numbered frames at the sink (the paper's tables 1 and 2 count 10-13 %% of a TCP stream
out of order under round-robin). RTT: ping's mean, and its excess over the plain node.
NET_RX busy: each core's share of the peak trials' time in the NET_RX softirq, where the
forwarding (and the generator's and sink's receive work) runs: where the cores go.

`, rep.Machine.Cores)
	b.WriteString("| engines | dispatch | FIB | peak (kpps) | ÷ 1 engine | per engine | TCP (Mbit/s) | reordered | RTT (µs) | RTT excess (µs) | NET_RX busy per core |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Engines {
		eng, disp := fmt.Sprint(r.Engines), r.Dispatch
		if r.Engines == 0 {
			eng, disp = "plain", "–"
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %v | %s | %s | %s | %s | %v |\n", eng, disp, r.FIBPrefixes, result.FormatF(r.PeakPPS/1e3, 1),
			result.FormatF(r.PeakRatioToOneEngine, 2), r.PerEngine, result.FormatF(r.TCPMbps, 0), result.FormatF(r.ReorderRatio, 4),
			result.FormatF(r.RTTUS, 0), result.FormatF(r.RTTOverheadUS, 0), busyText(r.SoftirqBusy))
	}
	if len(rep.EnginesMirror) > 0 {
		b.WriteString("\nFIB mirroring: routes added in the control node with `ip -batch`, until the last is in every engine.\n\n")
		b.WriteString("| routes | engines | ip -batch (s) | in every engine after (s) |\n|---|---|---|---|\n")
		for _, m := range rep.EnginesMirror {
			fmt.Fprintf(b, "| %d | %d | %s | %s |\n", m.Routes, m.Engines, result.FormatF(m.Apply, 3), result.FormatF(m.Seconds, 3))
		}
	}
	b.WriteString("\n")
}

// busyText shows each core's NET_RX share, or a dash for a run that did not measure it.
func busyText(busy []float64) string {
	if len(busy) == 0 {
		return "–"
	}
	parts := make([]string, len(busy))
	for i, b := range busy {
		parts[i] = result.FormatF(b, 2)
	}
	return strings.Join(parts, " ")
}
