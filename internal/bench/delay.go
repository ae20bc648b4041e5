package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/bench/measure"
	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
	"github.com/trellisnet/trellis/internal/logline"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
	"golang.org/x/sys/unix"
)

// DelayConfigs are the delays (and the jitter) it measures at each rate, as a file writes them;
// "" is none, the path's own delay.
var DelayConfigs = []string{"", "delay: 1ms", "delay: 10ms", "delay: 100ms", "delay: 20ms, jitter: 4ms, distribution: normal"}

// delayGap is the time between two probe frames: 64-byte frames every 2 ms are 256 kbit/s, a
// quarter of the slowest rate, so no queue builds up in front of the rate.
const delayGap = 2 * time.Millisecond

// ceilingSize is the size of the frames the ceiling sends (50 times DelayFrames of them).
const ceilingSize = 1514

// delay measures, on a running two-node link, the one-way delay of DelayFrames probe frames
// from node a to node b for each rate of Options.DelayRates and delay of DelayConfigs (each set live
// by `up`), and the ceiling: full frames sent as fast as one sender can over the link uncapped,
// without a delay and with 1 ms, both in the same run.
func (r *runner) delay() (err error) {
	st, err := r.h.Store()
	if err != nil {
		return err
	}
	const name = "bench-delay"
	res := &result.DelayResult{Frames: r.opt.DelayFrames, Load1: load1(), Kernel: kernelRelease()}
	defer func() { err = errors.Join(err, setup.DownQuiet(st, name)) }()
	var pr *impairProbe
	defer func() { pr.close() }()
	for _, rate := range r.opt.DelayRates {
		for _, cfg := range DelayConfigs {
			keys := ""
			if cfg != "" {
				keys = "    " + strings.ReplaceAll(cfg, ", ", "\n    ") + "\n"
			}
			n, err := delayUp(st, name, "    rate: "+rate+"\n"+keys, r.opt.Substrate, &res.Way)
			if err != nil {
				return err
			}
			if pr == nil {
				if pr, err = openImpairProbe(st, name); err != nil {
					return err
				}
			}
			run, err := measure.OneWay(r.ctx, pr.tx, pr.rxNS, "eth1", pr.base, r.opt.DelayFrames, delayGap)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", rate, cfg, err)
			}
			s := measure.StatsOf(run.Delays)
			im := n.Links[0].Impair
			row := &result.DelayRow{Rate: rate, Config: cfg, Delay: msOf(im.Delay), Jitter: msOf(im.Jitter), Median: msOf(s.Median), P99: msOf(s.P99),
				Mean: msOf(s.Mean), SD: msOf(s.SD), Lost: run.Lost}
			r.logf("   %-8s %-48s median %.3f p99 %.3f mean %.3f sd %.3f ms, %d lost\n", rate, cfg, row.Median, row.P99, row.Mean, row.SD, row.Lost)
			res.Rows = append(res.Rows, row)
		}
	}
	if res.Ceiling, err = r.delayCeiling(st, name, pr); err != nil {
		return err
	}
	r.rep.Delay = res
	return nil
}

// delayCeiling sends full frames as fast as it can over the link uncapped, without a delay
// and with 1 ms, and returns the rates that arrived.
func (r *runner) delayCeiling(st *state.Store, name string, pr *impairProbe) (*result.DelayCeiling, error) {
	c := &result.DelayCeiling{FrameSize: ceilingSize, Frames: 50 * r.opt.DelayFrames}
	base, err := measure.UDPFrames(measure.FlowAddrs{DstMAC: net.HardwareAddr(pr.base[0:6]), SrcMAC: net.HardwareAddr(pr.base[6:12]),
		SrcIP: net.IPv4(10, 9, 0, 1), DstIP: net.IPv4(10, 9, 0, 2), SrcPort: 10000, DstPort: 9}, ceilingSize, 1)
	if err != nil {
		return nil, err
	}
	for _, extra := range []string{"", "    delay: 1ms\n"} {
		var way string
		if _, err := delayUp(st, name, extra, r.opt.Substrate, &way); err != nil {
			return nil, err
		}
		run, err := measure.OneWay(r.ctx, pr.tx, pr.rxNS, "eth1", base[0], c.Frames, 0)
		if err != nil {
			return nil, fmt.Errorf("ceiling: %w", err)
		}
		kpps, mbps := 0.0, 0.0
		if got := len(run.Delays); got > 1 && run.Span > 0 {
			kpps = float64(got-1) / run.Span.Seconds() / 1e3
			mbps = kpps * 1e3 * ceilingSize * 8 / 1e6
		}
		if extra == "" {
			c.PlainKpps, c.PlainMbps, c.PlainLost = kpps, mbps, run.Lost
		} else {
			c.DelayKpps, c.DelayMbps, c.DelayLost = kpps, mbps, run.Lost
		}
		label := "no delay"
		if extra != "" {
			label = "delay 1ms"
		}
		r.logf("   ceiling, %-9s %.1f kpps (%.0f Mbit/s) of %d-byte frames, %d of %d lost\n", label, kpps, mbps, ceilingSize, run.Lost, c.Frames)
	}
	return c, nil
}

// delayUp puts the delay part's network up (or changes it live) with link keys extra and opt, and
// sets way to how the machine delays frames.
func delayUp(st *state.Store, name, extra string, opt substrate.Options, way *string) (*spec.Network, error) {
	topo := strings.Replace(impairNet, "name: bench-impair", "name: "+name, 1) + extra
	n, err := spec.Parse(name+".yaml", []byte(topo))
	if err != nil {
		return nil, err
	}
	var log strings.Builder
	opt.Log = logline.Logger(nil, &log)
	if _, err := substrate.Up(context.Background(), st, n, "", name+".yaml", opt); err != nil {
		return nil, fmt.Errorf("up with %q: %w", extra, err)
	}
	if strings.Contains(log.String(), "by netem") {
		*way = "netem"
	} else if strings.Contains(log.String(), "delay line") {
		*way = "delay line"
	}
	return n, nil
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// kernelRelease is the running kernel's release.
func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "unknown"
	}
	return strings.TrimRight(string(u.Release[:]), "\x00")
}
