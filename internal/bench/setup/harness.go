package setup

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"time"

	"github.com/trellisnet/trellis/internal/netnsutil"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
	"github.com/vishvananda/netns"
)

// Harness builds the setups of one bench run and holds what they share: the run's record and
// work directory, the state directory of its trellis networks, and the CPUs that the generator
// and the node under test work on.
type Harness struct {
	GenCPU int       // the generator's CPU; -1: not pinned (one CPU only)
	FwdCPU int       // where receive processing is steered; -1: no steering
	Work   string    // the run's work directory (removed at Close)
	Log    io.Writer // progress
	// Trellis is the trellis binary that the simulated machines run; "": this program.
	Trellis string
	// Substrate is the machine's choices for the networks the harness puts up itself.
	Substrate substrate.Options
	rootNS    netns.NsHandle
	run       *Run
	st        *state.Store
	machines  int // pairs of simulated machines made so far
}

// Open starts a run: it removes what runs that were killed left behind (Clean), records this
// one in stateDir, and makes its work directory. Close ends it.
func Open(stateDir, trellis string, log io.Writer) (h *Harness, err error) {
	if log == nil {
		log = io.Discard
	}
	cleaned, err := Clean(stateDir)
	for _, id := range cleaned {
		fmt.Fprintf(log, "   removed what bench run %s (killed) left behind\n", id)
	}
	if err != nil {
		return nil, err
	}
	h = &Harness{GenCPU: -1, FwdCPU: -1, Log: log, Trellis: trellis}
	if n := runtime.NumCPU(); n >= 2 {
		h.GenCPU, h.FwdCPU = 0, n-1
	}
	if h.rootNS, err = netns.Get(); err != nil {
		return nil, err
	}
	if h.run, err = begin(stateDir); err != nil {
		h.rootNS.Close()
		return nil, err
	}
	h.Work = h.run.Work
	return h, nil
}

// Close ends the run: it removes the work directory and the run's record. The rigs must have
// been closed first.
func (h *Harness) Close() error {
	h.rootNS.Close()
	return h.run.end()
}

// TesterCPU is where machine A of the tunnel setups works in the CPU part: a CPU of its own
// when there are at least three, else the generator's.
func (h *Harness) TesterCPU() int {
	if runtime.NumCPU() >= 3 {
		return 1
	}
	return max(h.GenCPU, 0)
}

func (h *Harness) logf(format string, args ...any) { fmt.Fprintf(h.Log, format, args...) }

// Store is the state directory of the bench's own trellis networks, made on first use.
func (h *Harness) Store() (*state.Store, error) {
	if h.st == nil {
		st, err := state.Open(filepath.Join(h.Work, rootState))
		if err != nil {
			return nil, err
		}
		h.st = st
	}
	return h.st, nil
}

// namespace makes an anonymous network namespace that the rig frees at Close.
func (h *Harness) namespace(g *Rig) (netns.NsHandle, error) {
	ns, err := netnsutil.New()
	if err != nil {
		return ns, err
	}
	g.onClose(func() error { return ns.Close() })
	return ns, nil
}

// steer sends the receive processing of an interface to the forwarding CPU (RPS), so that the
// node under test forwards on one CPU while the generator runs on another.
func (h *Harness) steer(ns netns.NsHandle, ifname string) error {
	if h.FwdCPU < 0 {
		return nil
	}
	return netnsutil.SetRPS(ns, ifname, netnsutil.CPUMask(h.FwdCPU))
}

// Build makes the named setups (Names), each with nets parallel networks and frames of size
// bytes over flows UDP flows per network; on error, what was built is torn down.
func (h *Harness) Build(names []string, nets, size, flows int) ([]*Rig, error) {
	var rigs []*Rig
	for _, name := range names {
		k := Find(name)
		if k == nil {
			return nil, errors.Join(Check([]string{name}), CloseAll(rigs))
		}
		t0 := time.Now()
		g, err := k.build(h, nets)
		if err == nil {
			err = g.SetFrames(size, flows)
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("building %s: %w", name, err), g.Close(), CloseAll(rigs))
		}
		h.logf("   built %s (%d network(s)) in %.2fs\n", name, nets, time.Since(t0).Seconds())
		rigs = append(rigs, g)
	}
	return rigs, nil
}
