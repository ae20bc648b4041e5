package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// ErrRefused: the placer found that the network does not fit.
var ErrRefused = errors.New("refused")

// ErrFailed: an agent could not apply the network on its machine.
var ErrFailed = errors.New("failed")

// Progress is where a network stands in the cluster.
type Progress struct {
	Placement *Placement // nil: not placed yet
	Statuses  []*Status
	// Waiting lists the machines of the placement that have not reported the generation
	// converged with their nodes.
	Waiting []string
}

// Done tells whether every machine of the placement converged to generation gen.
func (p *Progress) Done() bool {
	return p.Placement != nil && p.Placement.Refused == "" && len(p.Waiting) == 0
}

// State sums up where a network stands at generation gen, as `trellis --cluster ls` and the
// API say it: placing, refused, failed (an agent could not apply gen), up or converging.
func (p *Progress) State(gen int64) string {
	switch {
	case p.Placement == nil:
		return "placing"
	case p.Placement.Refused != "":
		return "refused"
	}
	for _, st := range p.Statuses {
		if st.Generation == gen && st.State == Failed {
			return "failed"
		}
	}
	if p.Done() {
		return "up"
	}
	return "converging"
}

// ProgressOf reads where network name of tenant stands at generation gen.
func (s *Store) ProgressOf(ctx context.Context, tenant, name string, gen int64) (*Progress, error) {
	pl, err := s.Placement(ctx, tenant, name)
	if errors.Is(err, ErrNotFound) {
		return &Progress{}, nil
	}
	if err != nil {
		return nil, err
	}
	pr := &Progress{}
	if pl.Generation != gen {
		return pr, nil
	}
	pr.Placement = pl
	if pr.Statuses, err = s.statusesOf(ctx, pl); err != nil {
		return nil, err
	}
	want := map[string]int{}
	for _, m := range pl.Nodes {
		want[m]++
	}
	for _, st := range pr.Statuses {
		if st.Generation == gen && st.State == Converged && st.Nodes == want[st.Machine] {
			delete(want, st.Machine)
		}
	}
	for m := range want {
		pr.Waiting = append(pr.Waiting, m)
	}
	sort.Strings(pr.Waiting)
	return pr, nil
}

// Wait waits until network name of tenant is converged at generation gen on every machine of
// its placement, and returns its progress. It returns early with an error wrapping ErrRefused
// (the placement says why) or ErrFailed (naming the machine and its error); ctx bounds it.
func (s *Store) Wait(ctx context.Context, tenant, name string, gen int64) (*Progress, error) {
	for {
		pr, err := s.ProgressOf(ctx, tenant, name, gen)
		if err != nil {
			return nil, err
		}
		if pr.Placement != nil && pr.Placement.Refused != "" {
			return pr, fmt.Errorf("%w: network %s does not fit: %s", ErrRefused, name, pr.Placement.Refused)
		}
		var failed []string
		for _, st := range pr.Statuses {
			if st.Generation == gen && st.State == Failed {
				failed = append(failed, fmt.Sprintf("on %s: %s", st.Machine, st.Error))
			}
		}
		if len(failed) > 0 {
			return pr, fmt.Errorf("%w: network %s: %s", ErrFailed, name, strings.Join(failed, "; "))
		}
		if pr.Done() {
			return pr, nil
		}
		select {
		case <-ctx.Done():
			what := "no placement yet (is a placer running?)"
			if pr.Placement != nil {
				what = "waiting for " + strings.Join(pr.Waiting, ", ") + " (are their agents running?)"
			}
			return pr, fmt.Errorf("network %s, generation %d: not converged in time: %s", name, gen, what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
