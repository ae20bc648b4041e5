package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/trellisnet/trellis/internal/bench/result"
)

// scalingProfiles writes, under the scaling table, where the forwarding CPU's time went for
// each network count that was profiled: nanoseconds per frame by group, and the top symbols.
func scalingProfiles(b *strings.Builder, rep *result.Report) {
	var ps []*result.ScaleResult
	for _, s := range rep.Scaling {
		if s.Profile != nil {
			ps = append(ps, s)
		}
	}
	if len(ps) == 0 {
		return
	}
	b.WriteString("Where the forwarding CPU's time goes at each count (`perf record -a -g` over one trial at the\n" +
		"offered rate of the count's best trial; nanoseconds per frame delivered, as in Where the time goes):\n\n")
	cell := map[int]map[string]float64{}
	total := map[string]float64{}
	for _, s := range ps {
		cell[s.Networks] = map[string]float64{}
		for _, g := range s.Profile.Groups {
			cell[s.Networks][g.Name] = g.NSPerFrame
			total[g.Name] = max(total[g.Name], g.NSPerFrame)
		}
	}
	groups := make([]string, 0, len(total))
	for g := range total {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool {
		if total[groups[i]] != total[groups[j]] {
			return total[groups[i]] > total[groups[j]]
		}
		return groups[i] < groups[j]
	})
	b.WriteString("| ns per frame |")
	for _, s := range ps {
		fmt.Fprintf(b, " %d |", s.Networks)
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(ps)) + "\n")
	for _, g := range groups {
		fmt.Fprintf(b, "| %s |", g)
		for _, s := range ps {
			if v, ok := cell[s.Networks][g]; ok {
				fmt.Fprintf(b, " %s |", result.FormatF(v, 0))
			} else {
				b.WriteString(" – |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("| **total** |")
	for _, s := range ps {
		sum := 0.0
		for _, g := range s.Profile.Groups {
			sum += g.NSPerFrame
		}
		fmt.Fprintf(b, " **%s** |", result.FormatF(sum, 0))
	}
	b.WriteString("\n| offered (kpps) |")
	for _, s := range ps {
		fmt.Fprintf(b, " %s |", result.FormatF(s.Offered/1e3, 0))
	}
	b.WriteString("\n\nTop symbols (share of the forwarding CPU's busy samples):\n\n")
	for _, s := range ps {
		var top []string
		for _, sym := range s.Profile.Symbols[:min(8, len(s.Profile.Symbols))] {
			top = append(top, fmt.Sprintf("`%s` %.1f%%", sym.Name, sym.Percent))
		}
		fmt.Fprintf(b, "- **%d networks**: %s\n", s.Networks, strings.Join(top, ", "))
	}
	b.WriteString("\n")
}
