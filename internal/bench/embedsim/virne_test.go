package embedsim

import (
	"context"
	"math"
	"testing"

	pe "github.com/trellisnet/trellis/internal/plan/placement"
	"github.com/trellisnet/trellis/internal/testkit"
)

// TestGRCAsVirne pins GRC-Rank on Virne's own WX100 instances to the figures of Virne's method
// (scripts/virne_grc_check.py; seed 0 is Virne's published Table 3 row: 58.90 %, 0.56, 9269.03).
func TestGRCAsVirne(t *testing.T) {
	testkit.NotShort(t, "a few seconds")
	tests := []struct {
		seed     uint64
		accepted int
		lrc, lar float64
	}{
		{0, 589, 0.5566, 9269.03},
		{1111, 543, 0.5525, 8847.94},
	}
	for _, tt := range tests {
		res, err := Simulate(context.Background(), DefaultWX100().Generate(tt.seed), pe.NewGRC())
		if err != nil {
			t.Fatal(err)
		}
		if res.Accepted != tt.accepted || math.Abs(res.LRC-tt.lrc) > 5e-5 || math.Abs(res.LAR-tt.lar) > 5e-3 {
			t.Errorf("seed %d: accepted %d, lrc %.4f, lar %.2f; want %d, %.4f, %.2f", tt.seed, res.Accepted, res.LRC, res.LAR, tt.accepted, tt.lrc, tt.lar)
		}
	}
}
