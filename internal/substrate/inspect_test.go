package substrate

import (
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
)

// TestShaped checks that inspect reads the shapers' drops only for a plan with a rate cap.
func TestShaped(t *testing.T) {
	p := &plan.Plan{Links: []*plan.Link{{}, {}}}
	if shaped(p) {
		t.Errorf("a plan without rates is shaped")
	}
	p.Links[1].Rate = 1e6
	if !shaped(p) {
		t.Errorf("a plan with a rate is not shaped")
	}
}
