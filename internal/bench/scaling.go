package bench

import (
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"time"

	"github.com/trellisnet/trellis/internal/bench/measure"
	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
	"github.com/trellisnet/trellis/internal/spec"
)

// scaling measures the aggregate peak rate of 1, 8, ... shortbridge networks forwarding at once
// (paper, figures 8 and 10): each a trellis network of its own with a source, a node under test
// and a sink, the generator spreading frames evenly over all sources. Networks are added to the
// same rig from one count to the next, so building 1024 costs the time of 1024, not of 1+8+...
func (r *runner) scaling() (err error) {
	counts := append([]int(nil), r.opt.Networks...)
	sort.Ints(counts)
	if len(counts) == 0 {
		return nil
	}
	g := r.h.NewRig(spec.Shortbridge)
	defer func() { err = errors.Join(err, g.Close()) }()
	var one []float64
	for _, n := range counts {
		t0, before := time.Now(), g.Nets
		for i := g.Nets; i < n; i++ {
			if err := r.h.AddTrellisNet(g, fmt.Sprintf("bench-scale-%d", i), spec.Shortbridge, false); err != nil {
				return fmt.Errorf("network %d of %d: %w", i+1, n, err)
			}
			g.Nets = i + 1
		}
		build := time.Since(t0).Seconds()
		if err := g.SetFrames(r.opt.Size, r.opt.Flows); err != nil { // new sources' sockets too
			return err
		}
		if _, err := g.Trial(r.ctx, 0, warmup); err != nil {
			return err
		}
		var agg []float64
		var bestIn float64
		for rep := 0; rep < r.opt.Repeat; rep++ {
			full, err := g.Trial(r.ctx, 0, r.opt.Trial)
			if err != nil {
				return err
			}
			best, in := full.Out, full.In
			for _, f := range []float64{0.3, 0.45, 0.6, 0.8} {
				t, err := g.Trial(r.ctx, f*full.In, r.opt.Trial)
				if err != nil {
					return err
				}
				if t.Out > best {
					best, in = t.Out, t.In
				}
			}
			agg = append(agg, best)
			bestIn = in
		}
		if n == counts[0] {
			one = agg
		}
		res := &result.ScaleResult{Setup: g.Name, Networks: n, Aggregate: result.StatOf(agg), Ratio: result.RatioStat(agg, one), BuildSecs: build, Offered: bestIn}
		res.Profile = r.scaleProfile(g, n, bestIn)
		r.rep.Scaling = append(r.rep.Scaling, res)
		r.logf("   %5d networks: %s aggregate (%.2f of %d; offered %s) — %d more built in %.1fs\n", n, result.Kpps(res.Aggregate.Median), res.Ratio.Median, counts[0], result.Kpps(bestIn), n-before, build)
	}
	if counts[0] != 1 {
		r.note("scaling ratios are to %d networks, the smallest count of the run", counts[0])
	}
	return nil
}

// scaleProfile records where the forwarding CPU's time goes while the generator offers rate
// through the n networks of g, when perf is installed; nil otherwise or if it fails (noted).
func (r *runner) scaleProfile(g *setup.Rig, n int, rate float64) *result.ProfileResult {
	perf, err := exec.LookPath("perf")
	if err != nil || r.h.FwdCPU < 0 || rate <= 0 {
		return nil
	}
	prof := &measure.Profiler{Perf: perf, Dir: r.h.Work, GenCPU: r.h.GenCPU, FwdCPU: r.h.FwdCPU}
	name := fmt.Sprintf("%s-x%d", g.Name, n)
	res, err := prof.Profile(r.ctx, name, &g.Traffic, rate, max(r.opt.Trial, 500*time.Millisecond))
	if err != nil {
		r.note("profile of %d networks failed: %v", n, err)
		return nil
	}
	return res
}
