package bench

import (
	"math"
	"runtime"
	"time"

	"github.com/trellisnet/trellis/internal/bench/measure"
)

// startBusy samples meter's softirq times (nil: nothing to measure); the function it returns
// gives each core's share of the time since then spent in the NET_RX softirq.
func startBusy(meter *measure.SoftirqMeter) (func() ([]float64, error), error) {
	if meter == nil {
		return func() ([]float64, error) { return nil, nil }, nil
	}
	s0, err := meter.Read()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	return func() ([]float64, error) {
		s1, err := meter.Read()
		if err != nil {
			return nil, err
		}
		wall := float64(time.Since(t0).Nanoseconds())
		out := make([]float64, min(meter.NCPU, runtime.NumCPU()))
		for cpu := range out {
			ns, _ := s1.Since(s0, cpu, measure.SoftirqNetRX)
			out[cpu] = math.Round(float64(ns)/wall*1000) / 1000
		}
		return out, nil
	}, nil
}
