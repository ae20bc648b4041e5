// Package bench measures how fast virtual networks forward, the way the Trellis paper measured
// it (section 5): a traffic generator in a source namespace, one node under test, and a sink that
// counts, for each way of forwarding (native kernel, trellis with shortbridge or bridge, a
// user-space relay, and trellis over two simulated machines with EGRE or VXLAN tunnels), all in
// one run so that every ratio to native is taken on the same machine under the same conditions.
// It measures the CPU cost per frame with eBPF on the softirq tracepoints and profiles where the
// time goes with perf; it also times deployment, scaling to many networks and isolation between
// networks, and writes the figures as JSON, PNG plots and a Markdown page.
package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/trellisnet/trellis/internal/state"
	"github.com/vishvananda/netns"
)

// Parts of a run, in the order they run.
const (
	PartForward   = "forward"   // generator ceiling; sweep, peak and zero-loss rate per setup
	PartCPU       = "cpu"       // CPU cost per forwarded frame
	PartSizes     = "sizes"     // peak rate per frame size
	PartScaling   = "scaling"   // many virtual networks at once
	PartIsolation = "isolation" // a flow's loss and jitter under another network's load
	PartDeploy    = "deploy"    // up and down of node chains, and Mininet
	PartProfile   = "profile"   // where the forwarding CPU's time goes (perf), per setup
)

// AllParts are the parts a full run makes.
var AllParts = []string{PartForward, PartCPU, PartProfile, PartSizes, PartScaling, PartIsolation, PartDeploy}

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
	LossTolerance float64       // the "zero-loss" search accepts this fraction of frames lost
	ZeroLossSteps int           // binary search steps
	Log           io.Writer     // progress
	Trellis       string        // the trellis binary that the tunnel setups run; "": this program
}

// DefaultOptions is a full run.
func DefaultOptions() Options {
	return Options{
		Parts:         AllParts,
		Setups:        []string{"native", "shortbridge", "bridge", "userspace", "egre-shortbridge", "egre-bridge", "vxlan"},
		Repeat:        5,
		Trial:         time.Second,
		Size:          64,
		Flows:         1,
		Sizes:         []int{64, 128, 256, 512, 1024, 1500},
		Networks:      []int{1, 8, 64, 256, 512, 1024},
		Chains:        []int{10, 100, 1000},
		Mininet:       true,
		LossTolerance: 0.0001,
		ZeroLossSteps: 6,
		Log:           io.Discard,
	}
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
	o.ZeroLossSteps = 3
	return o
}

// interrupted is set when the run is asked to stop.
var interrupted atomic.Bool

type runner struct {
	opt            Options
	log            io.Writer
	rootNS         netns.NsHandle
	genCPU, fwdCPU int
	work           string // temporary directory of this run
	st             *state.Store
	rep            *Report
	machines       int // pairs of simulated machines made so far
}

// ncpu is the number of CPUs the bench may use.
func (r *runner) ncpu() int { return runtime.NumCPU() }

// Run runs a benchmark and returns its report. Everything it creates (namespaces, veths,
// trellis networks in a state directory of its own, processes) is removed before it returns,
// also when it fails.
func Run(opt Options) (rep *Report, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the bench creates namespaces, devices and eBPF programs: run it as root")
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	if opt.Repeat < 1 {
		return nil, errors.New("repeat must be at least 1")
	}
	for _, n := range opt.Chains {
		if n < 2 {
			return nil, fmt.Errorf("a chain has at least 2 nodes, not %d", n)
		}
	}
	for _, n := range opt.Networks {
		if n < 1 {
			return nil, fmt.Errorf("scaling needs at least 1 network, not %d", n)
		}
	}
	setups := []string{"direct"}
	for _, s := range opt.Setups {
		k := findSetup(s)
		switch {
		case k == nil:
			return nil, fmt.Errorf("no setup named %q; known: %s", s, strings.Join(setupNames(), ", "))
		case k.build == nil:
			return nil, fmt.Errorf("setup %s is not available yet: %s", s, k.Pending)
		case s != "direct" && !slices.Contains(setups, s):
			setups = append(setups, s)
		}
	}
	r := &runner{opt: opt, log: opt.Log, genCPU: -1, fwdCPU: -1}
	if n := runtime.NumCPU(); n >= 2 {
		r.genCPU, r.fwdCPU = 0, n-1
	}
	if r.rootNS, err = netns.Get(); err != nil {
		return nil, err
	}
	defer r.rootNS.Close()
	if r.work, err = os.MkdirTemp("", "trellis-bench-"); err != nil {
		return nil, err
	}
	defer os.RemoveAll(r.work)
	r.rep = newReport(opt, r)
	// Ctrl-C or SIGTERM stops the run at the end of the current trial, and the setups are torn
	// down as after a failure. (After SIGKILL, trellis nodes outlive the bench: the log names the
	// state directory to run `trellis --state-dir DIR down --all` on.)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; ok {
			interrupted.Store(true)
		}
	}()
	defer func() { interrupted.Store(false) }()
	r.logf("   work directory %s (trellis networks in its state/)\n", r.work)
	start := time.Now()
	for _, part := range AllParts {
		if !slices.Contains(opt.Parts, part) {
			continue
		}
		t0 := time.Now()
		r.logf("== %s\n", part)
		var perr error
		switch part {
		case PartForward:
			perr = r.forward(setups)
		case PartCPU:
			perr = r.cpu(setups)
		case PartProfile:
			perr = r.profile(setups)
		case PartSizes:
			perr = r.sizes(setups)
		case PartScaling:
			perr = r.scaling()
		case PartIsolation:
			perr = r.isolation()
		case PartDeploy:
			perr = r.deploy()
		}
		if perr != nil {
			return r.rep, fmt.Errorf("%s: %w", part, perr)
		}
		r.logf("   (%s took %.1fs)\n", part, time.Since(t0).Seconds())
	}
	r.rep.TookSeconds = time.Since(start).Seconds()
	return r.rep, nil
}

func setupNames() []string {
	var out []string
	for _, k := range setupKinds {
		out = append(out, k.Name)
	}
	return out
}

func (r *runner) logf(format string, args ...any) { fmt.Fprintf(r.log, format, args...) }

// store is the state directory of the bench's own trellis networks, made on first use.
func (r *runner) store() (*state.Store, error) {
	if r.st == nil {
		st, err := state.Open(filepath.Join(r.work, "state"))
		if err != nil {
			return nil, err
		}
		r.st = st
	}
	return r.st, nil
}

// namespace makes an anonymous network namespace that the rig frees at Close.
func (r *runner) namespace(g *rig) (netns.NsHandle, error) {
	ns, err := newNetns()
	if err != nil {
		return ns, err
	}
	g.onClose(func() error { return ns.Close() })
	return ns, nil
}

// steer sends the receive processing of an interface to the forwarding CPU (RPS), so that the
// node under test forwards on one CPU while the generator runs on another.
func (r *runner) steer(ns netns.NsHandle, ifname string) error {
	if r.fwdCPU < 0 {
		return nil
	}
	return setRPS(ns, ifname, cpuMask(r.fwdCPU))
}

// build makes the named setups; on error, what was built is torn down.
func (r *runner) build(names []string, nets int) ([]*rig, error) {
	var rigs []*rig
	for _, name := range names {
		t0 := time.Now()
		g, err := findSetup(name).build(r, nets)
		if err == nil {
			err = g.setFrames(r, r.opt.Size, r.opt.Flows)
		}
		if err != nil {
			err = errors.Join(fmt.Errorf("building %s: %w", name, err), g.Close(), closeAll(rigs))
			return nil, err
		}
		r.logf("   built %s (%d network(s)) in %.2fs\n", name, nets, time.Since(t0).Seconds())
		rigs = append(rigs, g)
	}
	return rigs, nil
}

func closeAll(rigs []*rig) error {
	var errs []error
	for _, g := range rigs {
		errs = append(errs, g.Close())
	}
	return errors.Join(errs...)
}
