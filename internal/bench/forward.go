package bench

import (
	"errors"
	"math"
	"sort"
	"time"
)

// warmup runs each setup briefly before measuring: first frames fill caches and neighbour
// tables, and bring a node's CPU out of idle.
const warmup = 150 * time.Millisecond

// forward measures the generator's ceiling and, for every setup, input versus output over a
// sweep of offered rates, the peak forwarding rate and the zero-loss rate. Setups are measured
// in turn within each repetition, so a ratio to native compares figures taken minutes apart at
// most, and noise from other work on the machine spreads over all setups alike.
func (r *runner) forward(setups []string) (err error) {
	rigs, err := r.build(setups, 1)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeAll(rigs)) }()
	for _, g := range rigs {
		if _, err := g.trial(0, warmup); err != nil {
			return err
		}
	}
	direct, measured := rigs[0], rigs[1:]
	var offered, delivered []float64
	peaks := map[string][]float64{}
	zls := map[string][]float64{}
	results := map[string]*SetupResult{}
	for _, g := range measured {
		results[g.name] = &SetupResult{Name: g.name, Description: findSetup(g.name).Desc}
	}
	for rep := 0; rep < r.opt.Repeat; rep++ {
		t, err := direct.trial(0, r.opt.Trial)
		if err != nil {
			return err
		}
		offered, delivered = append(offered, t.In), append(delivered, t.Out)
		r.logf("   rep %d: generator ceiling %s offered, %s at the sink\n", rep+1, kpps(t.In), kpps(t.Out))
		for _, g := range measured {
			sweep, err := r.sweep(g)
			if err != nil {
				return err
			}
			zl, err := r.zeroLossFrom(g, sweep)
			if err != nil {
				return err
			}
			res := results[g.name]
			res.Sweeps = append(res.Sweeps, sweep)
			peaks[g.name] = append(peaks[g.name], peakOf(sweep))
			zls[g.name] = append(zls[g.name], zl)
			r.logf("   rep %d: %-12s peak %s, zero-loss %s\n", rep+1, g.name, kpps(peakOf(sweep)), kpps(zl))
		}
	}
	r.rep.Generator = &GenCeiling{Offered: statOf(offered), Delivered: statOf(delivered)}
	for _, g := range measured {
		res := results[g.name]
		res.Peak, res.ZeroLoss = statOf(peaks[g.name]), statOf(zls[g.name])
		if native, ok := peaks["native"]; ok {
			res.PeakRatio = ratioStat(peaks[g.name], native)
			res.ZeroLossRatio = ratioStat(zls[g.name], zls["native"])
		}
		r.rep.Setups = append(r.rep.Setups, res)
	}
	if p, ok := peaks["native"]; ok {
		if gen := statOf(offered).Median; gen < 2*statOf(p).Median {
			r.note("the generator offers %s at most, less than twice native's peak (%s): peaks near it may be the generator's limit", kpps(gen), kpps(statOf(p).Median))
		}
	}
	return nil
}

// ratioStat divides a's values by b's of the same repetition.
func ratioStat(a, b []float64) *Stat {
	var rs []float64
	for i := range a {
		if i < len(b) && b[i] > 0 {
			rs = append(rs, a[i]/b[i])
		} else {
			rs = append(rs, math.NaN())
		}
	}
	s := statOf(rs)
	return &s
}

// Offered rates of a sweep, as fractions of the generator's full rate. Past its peak a setup
// may forward less, not the same (frames dropped at a later hop have cost work first), so the
// peak is searched as the paper did: over the whole range of offered rates, then around the best.
var (
	sweepFull   = []float64{0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}
	sweepQuick  = []float64{0.1, 0.25, 0.4, 0.6, 0.8}
	refineFull  = []float64{0.9, 0.95, 1.05, 1.1}
	refineQuick = []float64{0.93, 1.07}
)

// sweep measures output against input: at the generator's full rate, at fractions of it, then
// around the rate that gave the most output. Trials come back in order of input rate.
func (r *runner) sweep(g *rig) ([]Trial, error) {
	full, err := g.trial(0, r.opt.Trial)
	if err != nil {
		return nil, err
	}
	ts := []Trial{full}
	fracs, refine := sweepFull, refineFull
	if r.opt.Quick {
		fracs, refine = sweepQuick, refineQuick
	}
	best := full
	for _, f := range fracs {
		t, err := g.trial(f*full.In, r.opt.Trial)
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
			t, err := g.trial(f*best.Offered, r.opt.Trial)
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
// and the slowest that lost frames.
func (r *runner) zeroLossFrom(g *rig, sweep []Trial) (float64, error) {
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
		return best, nil // nothing lost even at the generator's full rate
	}
	if lo >= hi {
		lo, best = 0, 0 // noise: a loss below a pass; search from zero
	}
	for i := 0; i < r.opt.ZeroLossSteps; i++ {
		mid := (lo + hi) / 2
		t, err := g.trial(mid, r.opt.Trial)
		if err != nil {
			return 0, err
		}
		if t.Loss <= tol {
			lo, best = mid, max(best, t.In)
		} else {
			hi = mid
		}
	}
	return best, nil
}

// cpu measures the CPU cost per forwarded frame (trials of at least a second: /proc/stat counts
// in 10 ms units), at one rate that every kernel setup forwards
// without loss (70% of the lowest zero-loss rate of the forwarding part), and for the user-space
// setup at 70% of its own. The sink's share, measured in setup direct at the same rate, is
// subtracted.
func (r *runner) cpu(setups []string) (err error) {
	if r.fwdCPU < 0 {
		r.note("one CPU only: the CPU cost per frame cannot be told apart from the generator's, not measured")
		return nil
	}
	rigs, err := r.build(setups, 1)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeAll(rigs)) }()
	zl := map[string]float64{}
	for _, s := range r.rep.Setups {
		zl[s.Name] = s.ZeroLoss.Median
	}
	common := math.Inf(1)
	for _, g := range rigs[1:] {
		if g.name != "userspace" {
			if v, ok := zl[g.name]; ok && v > 0 {
				common = min(common, 0.7*v)
			}
		}
	}
	if math.IsInf(common, 1) {
		// No forwarding part in this run: find a rate quickly.
		for _, g := range rigs[1:] {
			if g.name != "userspace" {
				t, err := g.trial(0, r.opt.Trial)
				if err != nil {
					return err
				}
				common = min(common, 0.5*t.Out)
			}
		}
	}
	rateOf := func(g *rig) float64 {
		if g.name == "userspace" {
			if v := zl[g.name]; v > 0 {
				return 0.7 * v
			}
			return common / 10
		}
		return common
	}
	for _, g := range rigs {
		if _, err := g.trial(rateOf(g), warmup); err != nil {
			return err
		}
	}
	raw := map[string][]float64{}
	sinkAt := map[float64][]float64{} // the direct setup's cost, by rate
	for rep := 0; rep < r.opt.Repeat; rep++ {
		for _, g := range rigs {
			rates := []float64{rateOf(g)}
			if g.name == "direct" { // the sink's share at every rate used
				rates = nil
				for _, h := range rigs[1:] {
					if !containsF(rates, rateOf(h)) {
						rates = append(rates, rateOf(h))
					}
				}
			}
			for _, rate := range rates {
				c, _, err := g.cpuCost(r.fwdCPU, rate, max(r.opt.Trial, time.Second))
				if err != nil {
					return err
				}
				if g.name == "direct" {
					sinkAt[rate] = append(sinkAt[rate], c)
				} else {
					raw[g.name] = append(raw[g.name], c)
				}
			}
		}
	}
	for _, g := range rigs[1:] {
		rate := rateOf(g)
		sink := statOf(sinkAt[rate]).Median
		var net []float64
		for _, v := range raw[g.name] {
			net = append(net, v-sink)
		}
		res := &CPUResult{Setup: g.name, RatePPS: rate, Raw: statOf(raw[g.name]), Net: statOf(net)}
		r.rep.CPU = append(r.rep.CPU, res)
		r.logf("   %-12s %.0f ns per frame (raw %.0f, sink %.0f) at %s\n", g.name, res.Net.Median, res.Raw.Median, sink, kpps(rate))
	}
	var native []float64
	for _, c := range r.rep.CPU {
		if c.Setup == "native" {
			native = c.Net.Values
		}
	}
	if native != nil {
		for _, c := range r.rep.CPU {
			c.Ratio = ratioStat(c.Net.Values, native)
		}
	}
	return nil
}

func containsF(xs []float64, x float64) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// sizes measures the peak rate of every setup at every frame size: the best output of the
// generator's full rate and of fractions of it.
func (r *runner) sizes(setups []string) (err error) {
	rigs, err := r.build(setups, 1)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeAll(rigs)) }()
	for _, size := range r.opt.Sizes {
		for _, g := range rigs {
			if err := g.setFrames(r, size, r.opt.Flows); err != nil {
				return err
			}
			if _, err := g.trial(0, warmup); err != nil {
				return err
			}
		}
		peaks := map[string][]float64{}
		for rep := 0; rep < r.opt.Repeat; rep++ {
			for _, g := range rigs {
				full, err := g.trial(0, r.opt.Trial)
				if err != nil {
					return err
				}
				best := full.Out
				// Past its peak a setup may forward less: try lower rates too.
				fracs := []float64{0.15, 0.3, 0.5, 0.75}
				if r.opt.Quick {
					fracs = []float64{0.25, 0.6}
				}
				for _, f := range fracs {
					t, err := g.trial(f*full.In, r.opt.Trial)
					if err != nil {
						return err
					}
					best = max(best, t.Out)
				}
				peaks[g.name] = append(peaks[g.name], best)
			}
		}
		for _, g := range rigs {
			var gbps []float64
			for _, p := range peaks[g.name] {
				gbps = append(gbps, p*float64(size)*8/1e9)
			}
			res := &SizeResult{Setup: g.name, Size: size, Peak: statOf(peaks[g.name]), Gbps: statOf(gbps)}
			if native, ok := peaks["native"]; ok {
				res.Ratio = ratioStat(peaks[g.name], native)
			}
			r.rep.Sizes = append(r.rep.Sizes, res)
			r.logf("   %4d bytes %-12s peak %s (%.2f Gbit/s)\n", size, g.name, kpps(res.Peak.Median), res.Gbps.Median)
		}
	}
	return nil
}

func kpps(v float64) string {
	if v >= 1e6 {
		return formatF(v/1e6, 2) + " Mpps"
	}
	return formatF(v/1e3, 1) + " kpps"
}
