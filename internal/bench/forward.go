package bench

import (
	"errors"
	"math"
	"sort"
	"time"

	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
)

// warmup runs each setup briefly before measuring: first frames fill caches and neighbour
// tables, and bring a node's CPU out of idle.
const warmup = 150 * time.Millisecond

// forward measures the generator's ceiling and, for every setup, input versus output over a
// sweep of offered rates, the peak forwarding rate and the zero-loss rate. Setups are measured
// in turn within each repetition, so a ratio to native compares figures taken minutes apart at
// most, and noise from other work on the machine spreads over all setups alike.
func (r *runner) forward() (err error) {
	rigs, err := r.build(r.setups, 1)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, setup.CloseAll(rigs)) }()
	for _, g := range rigs {
		if _, err := g.Trial(r.ctx, 0, warmup); err != nil {
			return err
		}
	}
	direct, measured := rigs[0], rigs[1:]
	var offered, delivered []float64
	peaks := map[string][]float64{}
	zls := map[string][]float64{}
	results := map[string]*result.SetupResult{}
	for _, g := range measured {
		results[g.Name] = &result.SetupResult{Name: g.Name, Description: setup.Find(g.Name).Desc}
	}
	for rep := 0; rep < r.opt.Repeat; rep++ {
		t, err := direct.Trial(r.ctx, 0, r.opt.Trial)
		if err != nil {
			return err
		}
		offered, delivered = append(offered, t.In), append(delivered, t.Out)
		r.logf("   rep %d: generator ceiling %s offered, %s at the sink\n", rep+1, result.Kpps(t.In), result.Kpps(t.Out))
		for _, g := range measured {
			sweep, err := r.sweep(g)
			if err != nil {
				return err
			}
			zl, more, err := r.zeroLossFrom(g, sweep)
			if err != nil {
				return err
			}
			sweep = append(sweep, more...)
			sort.Slice(sweep, func(i, j int) bool { return sweep[i].In < sweep[j].In })
			res := results[g.Name]
			res.Sweeps = append(res.Sweeps, sweep)
			peaks[g.Name] = append(peaks[g.Name], result.PeakOf(sweep))
			zls[g.Name] = append(zls[g.Name], zl)
			r.logf("   rep %d: %-12s peak %s, zero-loss %s\n", rep+1, g.Name, result.Kpps(result.PeakOf(sweep)), result.Kpps(zl))
		}
	}
	r.rep.Generator = &result.GenCeiling{Offered: result.StatOf(offered), Delivered: result.StatOf(delivered)}
	for _, g := range measured {
		res := results[g.Name]
		res.Peak, res.ZeroLoss = result.StatOf(peaks[g.Name]), result.StatOf(zls[g.Name])
		if native, ok := peaks["native"]; ok {
			res.PeakRatio = result.RatioStat(peaks[g.Name], native)
			res.ZeroLossRatio = result.RatioStat(zls[g.Name], zls["native"])
		}
		r.rep.Setups = append(r.rep.Setups, res)
	}
	if p, ok := peaks["native"]; ok {
		if gen := result.StatOf(offered).Median; gen < 2*result.StatOf(p).Median {
			r.note("the generator offers %s at most, less than twice native's peak (%s): peaks near it may be the generator's limit", result.Kpps(gen), result.Kpps(result.StatOf(p).Median))
		}
	}
	return nil
}

// Offered rates of a sweep, as fractions of the generator's full rate. Past its peak a setup
// may forward less, not the same (frames dropped at a later hop have cost work first), so the
// peak is searched as the paper did: over the whole range of offered rates, then around the best.
var (
	sweepFull   = []float64{0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}
	sweepQuick  = []float64{0.1, 0.4, 0.8}
	refineFull  = []float64{0.9, 0.95, 1.05, 1.1}
	refineQuick = []float64{0.93, 1.07}
)

// sweep measures output against input: at the generator's full rate, at fractions of it, then
// around the rate that gave the most output. Trials come back in order of input rate.
func (r *runner) sweep(g *setup.Rig) ([]result.Trial, error) {
	full, err := g.Trial(r.ctx, 0, r.opt.Trial)
	if err != nil {
		return nil, err
	}
	ts := []result.Trial{full}
	fracs, refine := sweepFull, refineFull
	if r.opt.Quick {
		fracs, refine = sweepQuick, refineQuick
	}
	best := full
	for _, f := range fracs {
		t, err := g.Trial(r.ctx, f*full.In, r.opt.Trial)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
		if t.Out > best.Out {
			best = t
		}
	}
	if best.Offered > 0 {
		for _, f := range refine {
			t, err := g.Trial(r.ctx, f*best.Offered, r.opt.Trial)
			if err != nil {
				return nil, err
			}
			ts = append(ts, t)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].In < ts[j].In })
	return ts, nil
}

// zeroLossFrom searches the zero-loss rate between the fastest sweep trial that lost nothing
// and the slowest that lost frames; it returns the trials of the search too.
func (r *runner) zeroLossFrom(g *setup.Rig, sweep []result.Trial) (float64, []result.Trial, error) {
	tol := r.opt.LossTolerance
	lo, best, hi := 0.0, 0.0, math.Inf(1)
	for _, t := range sweep {
		rate := t.Offered
		if rate == 0 {
			rate = t.In // the full-rate trial
		}
		if t.Loss <= tol {
			if rate > lo {
				lo, best = rate, t.In
			}
		} else {
			hi = min(hi, rate)
		}
	}
	if math.IsInf(hi, 1) {
		return best, nil, nil // nothing lost even at the generator's full rate
	}
	if lo >= hi {
		lo, best = 0, 0 // noise: a loss below a pass; search from zero
	}
	var tried []result.Trial
	for i := 0; i < r.opt.ZeroLossSteps; i++ {
		mid := (lo + hi) / 2
		t, err := g.Trial(r.ctx, mid, r.opt.Trial)
		if err != nil {
			return 0, nil, err
		}
		tried = append(tried, t)
		if t.Loss <= tol {
			lo, best = mid, max(best, t.In)
		} else {
			hi = mid
		}
	}
	return best, tried, nil
}

// sizes measures the peak rate of every setup at every frame size: the best output of the
// generator's full rate and of fractions of it.
func (r *runner) sizes() (err error) {
	rigs, err := r.build(r.setups, 1)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, setup.CloseAll(rigs)) }()
	for _, size := range r.opt.Sizes {
		for _, g := range rigs {
			if err := g.SetFrames(size, r.opt.Flows); err != nil {
				return err
			}
			if _, err := g.Trial(r.ctx, 0, warmup); err != nil {
				return err
			}
		}
		peaks := map[string][]float64{}
		for rep := 0; rep < r.opt.Repeat; rep++ {
			for _, g := range rigs {
				full, err := g.Trial(r.ctx, 0, r.opt.Trial)
				if err != nil {
					return err
				}
				best := full.Out
				// Past its peak a setup may forward less: try lower rates too.
				fracs := []float64{0.15, 0.3, 0.5, 0.75}
				if r.opt.Quick {
					fracs = []float64{0.5}
				}
				for _, f := range fracs {
					t, err := g.Trial(r.ctx, f*full.In, r.opt.Trial)
					if err != nil {
						return err
					}
					best = max(best, t.Out)
				}
				peaks[g.Name] = append(peaks[g.Name], best)
			}
		}
		for _, g := range rigs {
			var gbps []float64
			for _, p := range peaks[g.Name] {
				gbps = append(gbps, p*float64(size)*8/1e9)
			}
			res := &result.SizeResult{Setup: g.Name, Size: size, Peak: result.StatOf(peaks[g.Name]), Gbps: result.StatOf(gbps)}
			if native, ok := peaks["native"]; ok {
				res.Ratio = result.RatioStat(peaks[g.Name], native)
			}
			r.rep.Sizes = append(r.rep.Sizes, res)
			r.logf("   %4d bytes %-12s peak %s (%.2f Gbit/s)\n", size, g.Name, result.Kpps(res.Peak.Median), res.Gbps.Median)
		}
	}
	return nil
}
