package bench

import (
	"errors"
	"math"
	"time"

	"github.com/trellisnet/trellis/internal/bench/measure"
	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
)

// cpuTrial is what the CPU part measures over one trial.
type cpuTrial struct {
	frames  float64 // delivered at the sink
	fwdNS   float64 // NET_RX softirq time of the forwarding CPU
	otherNS float64 // NET_RX softirq time of every other CPU
	relayNS float64 // the relay's own CPU time, less the softirq time counted above already
	busyNS  float64 // the forwarding CPU's busy time by idle accounting (everything on it)
}

// cpu measures the CPU cost per forwarded frame: the time the forwarding CPU spends in the
// NET_RX softirq (eBPF on irq:softirq_entry and irq:softirq_exit), divided by the frames the
// sink counted, plus the relay process's own CPU time in setup userspace. Unlike busy time from
// the idle accounting, it does not count other processes that share the CPU. Each setup is
// measured at 70% of its own zero-loss rate. The sink's share, measured in setup direct at the
// same rate, is subtracted where the sink's work is on the forwarding CPU. The tunnel setups are
// steered split (Rig.Split): the forwarding CPU does machine B's work only.
func (r *runner) cpu() (err error) {
	if r.h.FwdCPU < 0 {
		r.note("one CPU only: the CPU cost per frame cannot be told apart from the generator's, not measured")
		return nil
	}
	meter, merr := measure.NewSoftirqMeter()
	if merr != nil {
		r.note("CPU cost not measured: the softirq tracepoints cannot be counted here (%v)", merr)
		return nil
	}
	defer func() { err = errors.Join(err, meter.Close()) }()
	rigs, err := r.build(r.setups, 1)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, setup.CloseAll(rigs)) }()
	for _, g := range rigs {
		if g.Split != nil {
			if err := g.Split(true); err != nil {
				return err
			}
		}
	}
	rates, err := r.cpuRates(rigs)
	if err != nil {
		return err
	}
	for _, g := range rigs {
		if _, err := g.Trial(r.ctx, rates[g.Name], warmup); err != nil {
			return err
		}
	}
	got, sinkAt, err := r.cpuTrials(meter, rigs, rates)
	if err != nil {
		return err
	}
	for _, g := range rigs[1:] {
		r.cpuResult(g, rates[g.Name], got[g.Name], sinkAt)
	}
	var native []float64
	for _, c := range r.rep.CPU {
		if c.Setup == "native" {
			native = c.Net.Values
		}
	}
	if native != nil {
		for _, c := range r.rep.CPU {
			c.Ratio = result.RatioStat(c.Net.Values, native)
		}
	}
	return nil
}

// cpuRates is the rate each setup is measured at: 70% of its own zero-loss rate, so that the
// setups are loaded alike, with NET_RX softirqs serving many frames each as they do near the
// peak (at a low rate each frame pays for a whole wake-up of the CPU), and without loss.
func (r *runner) cpuRates(rigs []*setup.Rig) (map[string]float64, error) {
	rates := map[string]float64{}
	for _, s := range r.rep.Setups {
		rates[s.Name] = 0.7 * s.ZeroLoss.Median
		if rates[s.Name] <= 0 { // lost frames at every rate tried: half its peak
			rates[s.Name] = 0.5 * s.Peak.Median
		}
	}
	for _, g := range rigs[1:] {
		if rates[g.Name] <= 0 { // no forwarding part in this run: find a rate quickly
			t, err := g.Trial(r.ctx, 0, r.opt.Trial)
			if err != nil {
				return nil, err
			}
			rates[g.Name] = 0.5 * t.Out
		}
	}
	return rates, nil
}

// cpuTrials measures every setup at its rate, Repeat times, and the direct setup (the sink's
// share of the forwarding CPU) at every rate used, by rate.
func (r *runner) cpuTrials(meter *measure.SoftirqMeter, rigs []*setup.Rig, rates map[string]float64) (map[string][]cpuTrial, map[float64][]float64, error) {
	irqCharged := !measure.IRQTimeAccounting()
	got := map[string][]cpuTrial{}
	sinkAt := map[float64][]float64{}
	for rep := 0; rep < r.opt.Repeat; rep++ {
		for _, g := range rigs {
			at := []float64{rates[g.Name]}
			if g.Name == setup.Direct {
				at = nil
				for _, h := range rigs[1:] {
					if !containsF(at, rates[h.Name]) {
						at = append(at, rates[h.Name])
					}
				}
			}
			for _, rate := range at {
				c, err := r.cpuTrial(meter, g, rate, r.opt.Trial, irqCharged)
				if err != nil {
					return nil, nil, err
				}
				if g.Name == setup.Direct {
					sinkAt[rate] = append(sinkAt[rate], c.fwdNS/c.frames)
				} else {
					got[g.Name] = append(got[g.Name], c)
				}
			}
		}
	}
	return got, sinkAt, nil
}

// cpuResult records setup g's CPU per frame from its trials at rate, less the sink's share.
func (r *runner) cpuResult(g *setup.Rig, rate float64, trials []cpuTrial, sinkAt map[float64][]float64) {
	sink := result.StatOf(sinkAt[rate]).Median
	if g.Tunnel {
		sink = 0 // the sink is on machine A, not on the forwarding CPU
	}
	var raw, net, other, relay, busy []float64
	for _, c := range trials {
		f := c.frames
		if f == 0 {
			f = math.NaN()
		}
		raw = append(raw, (c.fwdNS+c.relayNS)/f)
		net = append(net, (c.fwdNS+c.relayNS)/f-sink)
		other = append(other, c.otherNS/f)
		relay = append(relay, c.relayNS/f)
		busy = append(busy, c.busyNS/f)
	}
	res := &result.CPUResult{Setup: g.Name, RatePPS: rate, Raw: result.StatOf(raw), Net: result.StatOf(net), Other: result.StatOf(other), Busy: result.StatOf(busy), NodeMachineOnly: g.Tunnel}
	if g.Name == "userspace" {
		s := result.StatOf(relay)
		res.Relay = &s
	}
	r.rep.CPU = append(r.rep.CPU, res)
	r.logf("   %-16s %.0f ns per frame (raw %.0f, sink %.0f; other CPUs %.0f; busy %.0f) at %s\n", g.Name, res.Net.Median, res.Raw.Median, sink, res.Other.Median, res.Busy.Median, result.Kpps(rate))
}

// cpuTrial offers rate frames per second through g for dur and measures the CPU it costs.
// irqCharged says that the kernel charges softirq time to the task it interrupts (no
// IRQ_TIME_ACCOUNTING): the softirq time that ran on top of the relay is then in the relay's
// CPU time as well as in the softirq counts, and is taken out of the former.
func (r *runner) cpuTrial(meter *measure.SoftirqMeter, g *setup.Rig, rate float64, dur time.Duration, irqCharged bool) (cpuTrial, error) {
	var c cpuTrial
	relay := 0
	if g.Relay != nil {
		if relay = g.Relay(); relay == 0 {
			return c, errors.New("the relay process is gone")
		}
	}
	if err := meter.Watch(relay); err != nil {
		return c, err
	}
	defer meter.Watch(0)
	relay0, err := measure.TaskTime(relay)
	if err != nil {
		return c, err
	}
	s0, err := meter.Read()
	if err != nil {
		return c, err
	}
	busy, err := measure.StartBusy(r.h.FwdCPU)
	if err != nil {
		return c, err
	}
	t, err := g.Trial(r.ctx, rate, dur)
	if err != nil {
		return c, err
	}
	s1, err := meter.Read()
	if err != nil {
		return c, err
	}
	b, _, err := busy.Stop()
	if err != nil {
		return c, err
	}
	relay1, err := measure.TaskTime(relay)
	if err != nil {
		return c, err
	}
	c.frames = float64(t.Frames)
	c.busyNS = float64(b.Nanoseconds())
	var onRelay uint64
	for cpu := 0; cpu < meter.NCPU; cpu++ {
		ns, task := s1.Since(s0, cpu, measure.SoftirqNetRX)
		if cpu == r.h.FwdCPU {
			c.fwdNS += float64(ns)
		} else {
			c.otherNS += float64(ns)
		}
		onRelay += task
	}
	if relay != 0 {
		c.relayNS = float64(relay1 - relay0)
		if irqCharged {
			c.relayNS = max(0, c.relayNS-float64(onRelay))
		}
	}
	return c, nil
}

func containsF(xs []float64, x float64) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
