//go:build integration

package bench

import (
	"testing"

	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/spec"
)

// checkEngines checks the engines part of a quick run: every case measured, flow dispatch never
// reorders, every engine of a round-robin node gets frames, and 1000 routes reach every engine.
func checkEngines(t *testing.T, rep *result.Report) {
	t.Helper()
	if len(rep.Engines) != len(enginesCases(true)) {
		t.Fatalf("%d engines rows, want %d", len(rep.Engines), len(enginesCases(true)))
	}
	for _, r := range rep.Engines {
		if !(r.PeakPPS > 0) || !(r.RTTUS > 0) || r.ReorderRatio < 0 || r.ReorderRatio > 1 || len(r.PerEngine) != r.Engines {
			t.Errorf("engines row %+v: want a peak and an RTT, a ratio in [0, 1], a count per engine", r)
		}
		if r.Dispatch == spec.DispatchFlow && r.ReorderRatio != 0 {
			t.Errorf("%d engines, flow dispatch: reordered %v of one flow, want 0", r.Engines, r.ReorderRatio)
		}
		for i, n := range r.PerEngine {
			if r.Dispatch == spec.DispatchRoundRobin && n == 0 {
				t.Errorf("%d engines, round-robin: engine %d received nothing", r.Engines, i)
			}
		}
	}
	if len(rep.EnginesMirror) != 1 || rep.EnginesMirror[0].Routes != 1000 || !(rep.EnginesMirror[0].Seconds > 0) {
		t.Errorf("mirroring: %+v, want 1000 routes timed", rep.EnginesMirror)
	}
}
