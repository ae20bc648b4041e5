package report

import (
	"fmt"
	"strings"

	"github.com/trellisnet/trellis/internal/bench/result"
)

func applySection(b *strings.Builder, rep *result.Report, _ string) {
	a := rep.Apply
	if a == nil {
		return
	}
	b.WriteString("## Live changes\n\n")
	fmt.Fprintf(b, `Seconds for `+"`trellis up`"+` of a file on a running chain of %d nodes (made as in Deploy speed, in
%.2f s): the same file again, then one change at a time, in this order in each repetition. Each
time is what the CLI does, without its process start: read and check the file (spec.Load), then
converge the machine (substrate.Up), which changes only what differs, live, and leaves every
other node running. The rate is that of the middle link. Load average %.2f when the part began.

`, a.Nodes, a.BuildSeconds, a.Load1)
	b.WriteString("| change | up (s) | what up changed (first repetition) |\n|---|---|---|\n")
	for _, s := range a.Steps {
		what := "nothing"
		if len(s.Applied) > 0 {
			what = "`" + strings.Join(s.Applied, "`, `") + "`"
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", s.Change, ms(s.Seconds, 1, 3), what)
	}
	b.WriteString("\n")
}

func impairSection(b *strings.Builder, rep *result.Report, _ string) {
	im := rep.Impair
	if im == nil {
		return
	}
	b.WriteString("## Link impairments\n\n")
	fmt.Fprintf(b, `Impairments configured on the link of a running two-node network against what the link
delivered. For each row `+"`up`"+` sets the impairment on the link, live, and %d numbered 64-byte frames
go from node a to node b, sent from a packet socket on a's eth1 with at most 256 on their way (so
no queue on the path overflows); a packet socket on b's eth1 sees every frame before b's IP stack
does, corrupted ones too, and each is compared with the frame as sent. Lost and duplicated are in
percent of the frames sent, corrupted in percent of the frames that arrived; a loss burst is a
run of consecutive lost frames, whose mean length for loss P with correlation C is
1/((1-C)(1-P)). The row "none" is what the path loses by itself. Load average %.2f when the part
began.

`, im.Frames, im.Load1)
	b.WriteString("| configured | lost (%) | duplicated (%) | corrupted (%) | mean loss burst, configured | delivered |\n|---|---|---|---|---|---|\n")
	for _, r := range im.Rows {
		want, got := "–", "–"
		if r.GotBurst != nil {
			want, got = result.FormatF(r.WantBurst, 2), ms(*r.GotBurst, 1, 2)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", code(r.Config), ms(r.GotLoss, 1, 2), ms(r.GotDuplicate, 1, 2), ms(r.GotCorrupt, 1, 2), want, got)
	}
	fmt.Fprintf(b, "\nDelay: %s.\n\n", strings.TrimSuffix(im.Delay, "."))
}

// code quotes a topology file's text as code, "none" as it is.
func code(s string) string {
	if s == "none" || s == "" {
		return "none"
	}
	return "`" + s + "`"
}
