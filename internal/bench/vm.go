package bench

import (
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/kinds/vm"
)

// vmKnobs are the settings the vm part compares, as the YAML of a VM node's `vm:` mapping: the
// KVM paper's affinity (its figure 2), priority order (figure 3) and reservation (figure 4)
// experiments. A quick run compares the first two.
var vmKnobs = []struct{ knob, settings string }{
	{"defaults", ""},
	{"reserve 50%", "{reserve: 50%}"},
	{"vcpu and io on separate cores", "{pin: {vcpu: [1], io: [0]}}"},
	{"vcpu and io on one core", "{pin: {vcpu: [1], io: [1]}}"},
	{"one core, vc99 io99", "{pin: {vcpu: [1], io: [1]}, priority: {vcpu: 99, io: 99}}"},
	{"one core, vc99 io98", "{pin: {vcpu: [1], io: [1]}, priority: {vcpu: 99, io: 98}}"},
	{"one core, vc98 io99", "{pin: {vcpu: [1], io: [1]}, priority: {vcpu: 98, io: 99}}"},
	{"reserve 35%", "{reserve: 35%}"},
	{"reserve 65%", "{reserve: 65%}"},
	{"reserve 95%", "{reserve: 95%}"},
}

// vm measures VM nodes: the guest's boot time to its routing daemon, and for each setting of
// the knobs the peak forwarding rate through a VM node (the vm-tap setup) and the cores its
// vCPU and I/O threads used at full offered rate. Without KVM the figures are functional only.
func (r *runner) vm() error {
	res := &result.VMResult{Accel: vm.Accel()}
	res.Functional = res.Accel != "kvm"
	var boots []float64
	reps := r.opt.Repeat
	if r.opt.Quick {
		reps = 1 // each boot takes seconds under emulation
	}
	for rep := 0; rep < reps; rep++ {
		d, err := r.h.VMBoot(r.ctx)
		if err != nil {
			return err
		}
		boots = append(boots, d.Seconds())
		r.logf("   rep %d: a VM node booted to BIRD in %.1fs (%s)\n", rep+1, d.Seconds(), res.Accel)
	}
	res.BootSeconds = result.StatOf(boots)
	knobs := vmKnobs
	if r.opt.Quick {
		knobs = knobs[:2]
	}
	var defaults []float64
	skipped := false
	for _, k := range knobs {
		if res.Functional && strings.Contains(k.settings, "priority") {
			skipped = true
			continue
		}
		row, peaks, err := r.vmKnob(k.knob, k.settings)
		if err != nil {
			return err
		}
		if k.settings == "" {
			defaults = peaks
		} else if defaults != nil {
			row.PeakRatio = result.RatioStat(peaks, defaults)
		}
		res.Knobs = append(res.Knobs, row)
	}
	if skipped {
		r.note("vm: the priority settings were not measured: under emulation a vCPU thread at a real-time priority on the core of QEMU's main loop never yields it, and the VM stops answering (seen with vc99 io99 on one core)")
	}
	r.rep.VM = res
	return nil
}

// vmKnob measures one setting: a VM with it, peak rate over the run's repetitions, and the
// CPU of QEMU's threads during a trial at the generator's full rate.
func (r *runner) vmKnob(knob, settings string) (*result.VMKnobRow, []float64, error) {
	g, pid, err := r.h.VMRig(settings, r.opt.Size, r.opt.Flows)
	if err != nil {
		return nil, nil, err
	}
	defer g.Close()
	if _, err := g.Trial(r.ctx, 0, warmup); err != nil {
		return nil, nil, err
	}
	var peaks []float64
	for rep := 0; rep < r.opt.Repeat; rep++ {
		sweep, err := r.sweep(g)
		if err != nil {
			return nil, nil, err
		}
		peaks = append(peaks, result.PeakOf(sweep))
	}
	before, t0 := vm.ThreadCPU(pid), time.Now()
	if _, err := g.Trial(r.ctx, 0, r.opt.Trial); err != nil {
		return nil, nil, err
	}
	after, took := vm.ThreadCPU(pid), time.Since(t0)
	row := &result.VMKnobRow{Knob: knob, Settings: settings, Peak: result.StatOf(peaks), CPU: map[string]float64{}}
	for role, d := range after {
		row.CPU[role] = (d - before[role]).Seconds() / took.Seconds()
	}
	r.logf("   %-32s peak %s, vcpu %.2f cores, io %.2f cores\n", knob, result.Kpps(row.Peak.Median), row.CPU["vcpu"], row.CPU["io"])
	return row, peaks, nil
}
