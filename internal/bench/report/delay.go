package report

import (
	"fmt"
	"strings"

	"github.com/trellisnet/trellis/internal/bench/result"
)

func delaySection(b *strings.Builder, rep *result.Report, _ string) {
	d := rep.Delay
	if d == nil {
		return
	}
	b.WriteString("## Delay and jitter\n\n")
	fmt.Fprintf(b, `Delay configured on the link of a running two-node network (both directions, changed live by
`+"`up`"+`) against the one-way delay %d numbered 64-byte frames met from node a to node b, one every
2 ms, at each link rate: from the moment before each was sent from a packet socket on a's eth1
to the receiving kernel's timestamp on b's eth1 (`+"`trellis-bench --parts delay`"+`). Delayed by
%s, kernel %s; load average %.2f when the part began. Milliseconds; "none" is the path's own
delay.

`, d.Frames, delayWay(d.Way), d.Kernel, d.Load1)
	delayTable(b, d)
	for _, g := range rep.DelayGuests {
		fmt.Fprintf(b, "\n### In Linux %s\n\n%d frames a row, delayed by %s; load average %.2f when the part began. %s\n\n",
			g.Kernel, g.Frames, delayWay(g.Way), g.Load1, g.Where)
		delayTable(b, g)
	}
	b.WriteString("\n")
}

// delayWay is how a kernel delays frames, in words.
func delayWay(way string) string {
	if way == "delay line" {
		return "trellis's delay line (no netem in this kernel)"
	}
	return way
}

// delayTable is a delay run's rows and its ceiling.
func delayTable(b *strings.Builder, d *result.DelayResult) {
	b.WriteString("| rate | configured | median | p99 | mean | sd | lost |\n|---|---|---|---|---|---|---|\n")
	for _, r := range d.Rows {
		fmt.Fprintf(b, "| %s | %s | %.3f | %.3f | %.3f | %.3f | %d |\n", r.Rate, code(r.Config), r.Median, r.P99, r.Mean, r.SD, r.Lost)
	}
	if c := d.Ceiling; c != nil {
		fmt.Fprintf(b, `
Ceiling: %d frames of %d bytes sent as fast as one sender can over the link without a rate:
%.1f kpps (%.0f Mbit/s) arrived without a delay, %.1f kpps (%.0f Mbit/s) with `+"`delay: 1ms`"+`
(%d and %d frames lost).
`, c.Frames, c.FrameSize, c.PlainKpps, c.PlainMbps, c.DelayKpps, c.DelayMbps, c.PlainLost, c.DelayLost)
	}
}
