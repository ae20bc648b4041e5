package bench

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/bench/measure"
	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
)

// The profile part: `perf record -a -g` while the generator offers a setup its zero-loss rate
// (measure.Profiler), for the setups worth comparing.

// profileSetups are the setups the profile part looks at, when the run has them.
var profileSetups = []string{"native", "veth", "veth-impair", "rate", "shortbridge", "shortbridge-tcx", "shortbridge-xdp", "bridge", "lan", "egre-shortbridge", "egre-shortbridge-fib", "egre3-shortbridge", "egre3-bridge", "egre-bridge", "vxlan"}

// profileSetupsQuick are those of a quick run.
var profileSetupsQuick = []string{"veth", "shortbridge", "bridge", "lan"}

// profile records where the forwarding CPU spends its time in each profiled setup.
func (r *runner) profile() (err error) {
	perf, lerr := exec.LookPath("perf")
	if lerr != nil {
		r.note("perf is not installed (Debian: linux-perf): where the time goes not profiled")
		return nil
	}
	if r.h.FwdCPU < 0 {
		return nil
	}
	var names []string
	want := profileSetups
	if r.opt.Quick {
		want = profileSetupsQuick
	}
	for _, s := range want {
		if slices.Contains(r.setups, s) {
			names = append(names, s)
		}
	}
	if len(names) == 0 {
		return nil
	}
	rigs, err := r.build(names, 1)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, setup.CloseAll(rigs)) }()
	zl := map[string]float64{}
	for _, s := range r.rep.Setups {
		zl[s.Name] = s.ZeroLoss.Median
	}
	dur := max(r.opt.Trial, 500*time.Millisecond)
	prof := &measure.Profiler{Perf: perf, Dir: r.h.Work, GenCPU: r.h.GenCPU, FwdCPU: r.h.FwdCPU}
	for _, g := range rigs {
		rate := zl[g.Name]
		if _, err := g.Trial(r.ctx, rate, warmup); err != nil {
			return err
		}
		res, err := prof.Profile(r.ctx, g.Name, &g.Traffic, rate, dur)
		if err != nil {
			r.note("profile of %s failed: %v", g.Name, err)
			continue
		}
		r.rep.Profiles = append(r.rep.Profiles, res)
		var top []string
		for _, s := range res.Groups[:min(4, len(res.Groups))] {
			top = append(top, fmt.Sprintf("%s %.0f%%", s.Name, s.Percent))
		}
		r.logf("   %-16s %d samples at %s: %s\n", g.Name, res.Samples, result.Kpps(res.Frames/dur.Seconds()), strings.Join(top, ", "))
	}
	return nil
}
