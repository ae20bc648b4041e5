// Package bench runs the benchmark behind `trellis-bench`: it measures how fast virtual
// networks forward, the way the Trellis paper measured it (section 5), and also times
// deployment, scaling to many networks and isolation between networks. It is a user of the
// layers below it: the setups it measures through are built by package setup (through the
// spec, plan and substrate layers, as `trellis up` builds networks), the traffic and CPU time
// are measured by package measure, and the figures go into a result.Report, which package
// report renders (JSON, Markdown, plots) where a command asks for it. This package holds the
// run's options and its parts, each a function that builds what it needs, measures and fills
// its section of the report.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
)

// Parts of a run.
const (
	PartForward   = "forward"   // generator ceiling; sweep, peak and zero-loss rate per setup
	PartCPU       = "cpu"       // CPU cost per forwarded frame
	PartSizes     = "sizes"     // peak rate per frame size
	PartScaling   = "scaling"   // many virtual networks at once
	PartIsolation = "isolation" // a flow's loss and jitter under another network's load
	PartDeploy    = "deploy"    // up and down of node chains, and Mininet
	PartProfile   = "profile"   // where the forwarding CPU's time goes (perf), per setup
	PartApply     = "apply"     // live changes to a running chain: up of an unchanged or edited file
	PartImpair    = "impair"    // link impairments configured against delivered
	PartDelay     = "delay"     // delay and jitter configured against delivered, and the ceiling
	PartVM        = "vm"        // VM nodes: boot time, the KVM paper's knobs
	PartLimits    = "limits"    // a node's CPU limit on a busy machine
)

// part is one part of a run: run measures and adds its figures to r.rep.
type part struct {
	name string
	run  func(r *runner) error
}

// parts run in this order. A new part is one line here, a method of runner in a file of its
// own, a field of result.Report and a section of package report.
var parts = []part{
	{PartForward, (*runner).forward},
	{PartCPU, (*runner).cpu},
	{PartProfile, (*runner).profile},
	{PartSizes, (*runner).sizes},
	{PartScaling, (*runner).scaling},
	{PartIsolation, (*runner).isolation},
	{PartDeploy, (*runner).deploy},
	{PartLimits, (*runner).limits},
	{PartApply, (*runner).apply},
	{PartImpair, (*runner).impair},
	{PartDelay, (*runner).delay},
	{PartVM, (*runner).vm},
	{PartEngines, (*runner).engines},
	{PartCluster, (*runner).cluster},
}

// OptIn are the parts that run only when --parts names them: they need more than the kernel
// (the cluster part needs the etcd binary that scripts/setup.sh builds).
var OptIn = []string{PartCluster}

// AllParts are the parts a full run makes, in the order they run.
var AllParts = partNames()

func partNames() []string {
	var out []string
	for _, p := range parts {
		out = append(out, p.name)
	}
	return out
}

// Errors of Options.Check.
var (
	ErrUnknownPart = errors.New("no part named")
	ErrOptions     = errors.New("bad bench options")
)

// Options say what a run measures and how long it takes.
type Options struct {
	Quick         bool
	Parts         []string
	Setups        []string      // forwarding setups besides direct, first "native"
	Repeat        int           // every figure is measured this many times
	Trial         time.Duration // length of one generator run
	Size          int           // frame size of the forwarding, CPU, scaling and isolation parts
	Flows         int           // UDP flows per virtual network
	Sizes         []int         // frame sizes of the sizes part
	Networks      []int         // numbers of parallel virtual networks of the scaling part
	Chains        []int         // node counts of the deploy part
	Mininet       bool          // time Mininet on the same chains, if it is installed
	ApplyNodes    int           // nodes of the running chain of the apply part
	ImpairFrames  int           // numbered frames per measurement of the impair part
	DelayFrames   int           // probe frames per row of the delay part
	DelayRates    []string      // link rates the delay part measures at
	LossTolerance float64       // the "zero-loss" search accepts this fraction of frames lost
	ZeroLossSteps int           // binary search steps
	Log           io.Writer     // progress
	Trellis       string        // the trellis binary that the tunnel setups run; "": this program
	// StateDir is where the run records itself (STATE_DIR/bench/), so that what it leaves
	// behind if it is killed is removed by the next run (setup.Clean).
	StateDir string
	// ClusterNetworks is the larger number of networks the cluster part puts up at once.
	ClusterNetworks int
	// Substrate is the machine's choices (port namespaces, delay way, port hook, EGRE route)
	// for the networks the run puts up itself; the trellis binary it runs on the simulated
	// machines takes them from its environment.
	Substrate substrate.Options
}

// DefaultOptions is a full run.
func DefaultOptions() Options {
	o := Options{
		Parts:         slices.DeleteFunc(slices.Clone(AllParts), func(p string) bool { return slices.Contains(OptIn, p) }),
		Setups:        []string{"native", "veth", "veth-impair", "rate", "shortbridge", "bridge", "lan", "userspace", "egre-shortbridge", "egre-bridge", "egre3-shortbridge", "egre3-bridge", "vxlan"},
		Repeat:        5,
		Trial:         time.Second,
		Size:          64,
		Flows:         1,
		Sizes:         []int{64, 128, 256, 512, 1024, 1500},
		Networks:      []int{1, 8, 64, 256, 512, 1024},
		Chains:        []int{10, 100, 1000},
		Mininet:       true,
		ApplyNodes:    1000,
		ImpairFrames:  20000,
		DelayFrames:   1000,
		DelayRates:    []string{"1mbit", "10mbit", "100mbit"},
		LossTolerance: 0.0001,
		ZeroLossSteps: 6,
		Log:           io.Discard,
		StateDir:      state.DefaultDir,
	}
	o.ClusterNetworks = 100
	return o
}

// QuickOptions is a run of every part in under two minutes, with fewer and shorter trials.
func QuickOptions() Options {
	o := DefaultOptions()
	o.Quick = true
	o.Repeat = 2
	o.Trial = 250 * time.Millisecond
	o.Sizes = []int{64, 1500}
	o.Networks = []int{1, 8}
	o.Chains = []int{10}
	o.ApplyNodes = 100
	o.ClusterNetworks = 5
	o.ImpairFrames = 2000
	o.DelayFrames = 200
	o.DelayRates = []string{"10mbit"}
	o.ZeroLossSteps = 3
	// One router setup of the two: it has the builder of both; the default link with an
	// impairment or a rate are the veth and shortbridge paths with a program or a shaper more.
	o.Setups = slices.DeleteFunc(slices.Clone(o.Setups), func(s string) bool {
		return s == "egre3-bridge" || s == "veth-impair" || s == "rate"
	})
	return o
}

// Check returns an error for options that a run cannot make: an unknown part or setup (the
// error lists the known ones), fewer than one repetition, a chain of fewer than two nodes, a
// scaling step of no network, or an impairment measured over fewer than minImpairFrames.
func (o *Options) Check() error {
	var bad []string
	for _, p := range o.Parts {
		if !slices.Contains(AllParts, p) {
			bad = append(bad, fmt.Sprintf("%q", p))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("--parts: %w %s; known: %s", ErrUnknownPart, strings.Join(bad, ", "), strings.Join(AllParts, ", "))
	}
	if err := setup.Check(o.Setups); err != nil {
		return fmt.Errorf("--setups: %w", err)
	}
	if o.Repeat < 1 {
		return fmt.Errorf("%w: --repeat must be at least 1, not %d", ErrOptions, o.Repeat)
	}
	for _, n := range o.Chains {
		if n < 2 {
			return fmt.Errorf("%w: --chains: a chain has at least 2 nodes, not %d", ErrOptions, n)
		}
	}
	if o.ApplyNodes < 2 {
		return fmt.Errorf("%w: the apply part's chain has at least 2 nodes, not %d", ErrOptions, o.ApplyNodes)
	}
	if o.ImpairFrames < minImpairFrames {
		return fmt.Errorf("%w: the impair part sends at least %d frames per measurement, not %d", ErrOptions, minImpairFrames, o.ImpairFrames)
	}
	if o.DelayFrames < minDelayFrames {
		return fmt.Errorf("%w: --delay-frames: the delay part sends at least %d probe frames per row (its p99 needs them), not %d", ErrOptions, minDelayFrames, o.DelayFrames)
	}
	for _, r := range o.DelayRates {
		if _, err := spec.ParseRate(r); err != nil {
			return fmt.Errorf("%w: --delay-rates: %q: %v", ErrOptions, r, err)
		}
	}
	if o.ClusterNetworks < 1 {
		return fmt.Errorf("%w: the cluster part puts up at least 1 network, not %d", ErrOptions, o.ClusterNetworks)
	}
	for _, n := range o.Networks {
		if n < 1 {
			return fmt.Errorf("%w: --networks: scaling needs at least 1 network, not %d", ErrOptions, n)
		}
	}
	return nil
}

// minDelayFrames is the fewest probe frames whose 99th percentile is not their maximum.
const minDelayFrames = 100

// minImpairFrames is the fewest frames that say something about a loss of 1 %.
const minImpairFrames = 1000

// runner is one run: its options, its harness and the report it fills.
type runner struct {
	ctx    context.Context
	opt    Options
	h      *setup.Harness
	rep    *result.Report
	setups []string // setup.Direct, then the options' setups without repeats
}

// Run runs a benchmark and returns its report. Everything it creates (namespaces, veths,
// trellis networks in a state directory of its own, simulated machines, processes) is removed
// before it returns, also when it fails; after a SIGKILL, the next run removes it. Cancelling
// ctx (Ctrl-C) stops the run at the end of the current trial, and returns the figures so far
// with the error.
func Run(ctx context.Context, opt Options) (rep *result.Report, err error) {
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	if err := opt.Check(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the bench creates namespaces, devices and eBPF programs: run it as root")
	}
	h, err := setup.Open(opt.StateDir, opt.Trellis, opt.Log)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, h.Close()) }()
	h.Substrate = opt.Substrate
	r := &runner{ctx: ctx, opt: opt, h: h, setups: []string{setup.Direct}}
	for _, s := range opt.Setups {
		if !slices.Contains(r.setups, s) {
			r.setups = append(r.setups, s)
		}
	}
	r.rep = r.newReport()
	r.logf("   work directory %s (trellis networks in its state/)\n", h.Work)
	if netkit, why := dataplane.NetkitSupport(); netkit {
		r.note("ports are veth pairs: %s, but trellis does not use netkit devices yet", why)
	} else {
		r.note("ports are veth pairs, the fallback: %s", why)
	}
	start := time.Now()
	status, _ := opt.Log.(interface{ Status(string) }) // a terminal's status line (internal/progress)
	done := 0
	for _, p := range parts {
		if !slices.Contains(opt.Parts, p.name) {
			continue
		}
		t0 := time.Now()
		done++
		if status != nil {
			status.Status(fmt.Sprintf("bench part %d/%d: %s", done, len(opt.Parts), p.name))
		}
		r.logf("== %s\n", p.name)
		if err := p.run(r); err != nil {
			return r.rep, fmt.Errorf("%s: %w", p.name, err)
		}
		r.logf("   (%s took %.1fs)\n", p.name, time.Since(t0).Seconds())
	}
	r.rep.TookSeconds = time.Since(start).Seconds()
	return r.rep, nil
}

func (r *runner) logf(format string, args ...any) { fmt.Fprintf(r.opt.Log, format, args...) }

// note adds a note to the report, and logs it.
func (r *runner) note(format string, args ...any) {
	r.rep.Notes = append(r.rep.Notes, strings.TrimSpace(fmt.Sprintf(format, args...)))
	r.logf("   note: "+format+"\n", args...)
}

// build makes the named setups with the run's frame size and flows.
func (r *runner) build(names []string, nets int) ([]*setup.Rig, error) {
	return r.h.Build(names, nets, r.opt.Size, r.opt.Flows)
}
