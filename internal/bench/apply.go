package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
	"github.com/trellisnet/trellis/internal/logline"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
)

// The changes of the apply part, in the order each repetition makes them.
const (
	ApplyUnchanged = "unchanged file"
	ApplyRate      = "one link's rate"
	ApplyAddNode   = "one node added at the end"
	ApplyRemove    = "that node removed"
)

// applyStep is one change of a repetition: the file it writes (a chain of nodes nodes, with a
// rate of mbit on the middle link) and what up must report it changed ("op object" each).
type applyStep struct {
	change string
	nodes  int
	mbit   int
	want   []string
}

// applySteps are repetition rep's changes to a running chain of n nodes: the unchanged file
// (as the previous repetition left it), the middle link's rate changed, one node added at the
// end with its link, and that node removed again.
func applySteps(n, rep int) []applyStep {
	prev, rate := 0, 100+10*rep // Mbit/s; repetition 0 starts from no rate
	if rep > 0 {
		prev = rate - 10
	}
	return []applyStep{
		{ApplyUnchanged, n, prev, nil},
		{ApplyRate, n, rate, []string{"change link"}},
		{ApplyAddNode, n + 1, rate, []string{"add link", "add node"}},
		{ApplyRemove, n, rate, []string{"remove link", "remove node"}},
	}
}

// checkApplied returns an error unless up changed exactly what the step wants.
func checkApplied(step applyStep, got []substrate.Change) error {
	var ops []string
	for _, c := range got {
		ops = append(ops, c.Op+" "+c.Object)
	}
	slices.Sort(ops)
	if !slices.Equal(ops, step.want) {
		return fmt.Errorf("%s: up changed %v, want %v", step.change, got, step.want)
	}
	return nil
}

// apply times `trellis up` of a file on a running chain of nodes (ApplyNodes): the same file,
// then one change at a time, each repeated. Each time is what the CLI does: read and check the
// file (spec.Load), then substrate.Up; the process start of the CLI is left out.
func (r *runner) apply() (err error) {
	st, err := r.h.Store()
	if err != nil {
		return err
	}
	n := r.opt.ApplyNodes
	name := fmt.Sprintf("bench-apply-%d", n)
	path := filepath.Join(r.h.Work, name+".yaml")
	res := &result.ApplyResult{Nodes: n, Load1: load1()}
	defer func() { err = errors.Join(err, setup.DownQuiet(st, name)) }()
	build, _, err := r.upFile(st, path, ratedChain(name, n, n/2-1, 0), io.Discard)
	if err != nil {
		return fmt.Errorf("chain of %d: %w", n, err)
	}
	res.BuildSeconds = build
	r.logf("   chain of %d nodes up in %.2fs\n", n, build)
	times := map[string][]float64{}
	for rep := 0; rep < r.opt.Repeat; rep++ {
		for i, step := range applySteps(n, rep) {
			progress := io.Discard // the first repetition logs where up's time goes
			if rep == 0 {
				r.logf("   %s:\n", step.change)
				progress = &indent{w: r.opt.Log}
			}
			secs, got, err := r.upFile(st, path, ratedChain(name, step.nodes, n/2-1, step.mbit), progress)
			if err == nil {
				err = checkApplied(step, got)
			}
			if err != nil {
				return fmt.Errorf("chain of %d: %w", n, err)
			}
			times[step.change] = append(times[step.change], secs)
			if rep == 0 {
				res.Steps = append(res.Steps, result.ApplyStep{Change: step.change, Applied: changeTexts(got)})
			}
			res.Steps[i].Seconds = result.StatOf(times[step.change])
		}
		if err := r.ctx.Err(); err != nil {
			r.rep.Apply = res
			return err
		}
	}
	r.rep.Apply = res
	for _, s := range res.Steps {
		r.logf("   %-28s %.3fs (%.3f–%.3f)\n", s.Change, s.Seconds.Median, s.Seconds.Min, s.Seconds.Max)
	}
	return nil
}

// upFile writes a topology file to path and brings it up as `trellis up -v PATH` does, with its
// progress to log, returning the seconds it took and what up changed.
func (r *runner) upFile(st *state.Store, path string, data []byte, log io.Writer) (float64, []substrate.Change, error) {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return 0, nil, err
	}
	t0 := time.Now()
	n, err := spec.Load(path)
	if err != nil {
		return 0, nil, err
	}
	// The bench's own context is not handed down: Ctrl-C ends the run after this step, not in
	// the middle of a change that the deferred down would then have to finish.
	opt := r.opt.Substrate
	opt.Log = logline.Logger(nil, log)
	res, err := substrate.Up(context.Background(), st, n, "", path, opt)
	if err != nil {
		return 0, nil, err
	}
	return time.Since(t0).Seconds(), res.Changes, nil
}

func changeTexts(cs []substrate.Change) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.String())
	}
	return out
}

// indent writes each line to w indented as the bench's log is.
type indent struct{ w io.Writer }

func (d *indent) Write(p []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line != "" {
			if _, err := io.WriteString(d.w, "     "+line); err != nil {
				return 0, err
			}
		}
	}
	return len(p), nil
}
