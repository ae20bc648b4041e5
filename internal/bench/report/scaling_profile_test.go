package report

import (
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/bench/result"
)

func TestScalingProfiles(t *testing.T) {
	prof := func(ns float64) *result.ProfileResult {
		return &result.ProfileResult{Symbols: []result.ProfileRow{{Name: "tc_run", Percent: 9.5, NSPerFrame: ns}},
			Groups: []result.ProfileRow{{Name: "receive core", NSPerFrame: ns}, {Name: "eBPF programs", NSPerFrame: 2 * ns}}}
	}
	for _, tc := range []struct {
		name    string
		scaling []*result.ScaleResult
		want    []string // lines the section must hold, in order
		none    bool     // no section at all
	}{
		{"no profiles", []*result.ScaleResult{{Networks: 1}, {Networks: 8}}, nil, true},
		{"two counts", []*result.ScaleResult{{Networks: 1, Offered: 400e3, Profile: prof(100)}, {Networks: 8}, {Networks: 1024, Offered: 200e3, Profile: prof(300)}}, []string{
			"| ns per frame | 1 | 1024 |",
			"| eBPF programs | 200 | 600 |",
			"| receive core | 100 | 300 |",
			"| **total** | **300** | **900** |",
			"| offered (kpps) | 400 | 200 |",
			"- **1 networks**: `tc_run` 9.5%",
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			scalingProfiles(&b, &result.Report{Scaling: tc.scaling})
			out := b.String()
			if tc.none != (out == "") {
				t.Fatalf("section:\n%s\nwant none: %v", out, tc.none)
			}
			at := 0
			for _, w := range tc.want {
				i := strings.Index(out[at:], w)
				if i < 0 {
					t.Fatalf("section lacks %q after offset %d:\n%s", w, at, out)
				}
				at += i + len(w)
			}
		})
	}
}
