// Package substrate converges one machine to its part of a plan: it creates the nodes, ports,
// connectors and shapers of a virtual network in the kernel, changes rates live, and removes
// everything of a network again, also after a crash. It records what it creates in the state
// directory before creating it.
package substrate

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/state"
)

// Result says what Up did.
type Result struct {
	Created      bool     // the network was created
	RatesChanged []string // links whose rate was changed in place
	Took         time.Duration
}

// Up converges the machine to plan p, which came from the topology file file, writing progress
// to log. A network that
// is already up is left as it is, except for link rates, which are changed in place. If creating
// fails half-way, everything created so far is removed before Up returns.
func Up(st *state.Store, p *plan.Plan, file string, log io.Writer) (*Result, error) {
	start := time.Now()
	unlock, err := st.Lock(p.Network)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rec, err := st.Load(p.Network)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		changed, err := update(st, rec, p)
		return &Result{RatesChanged: changed, Took: time.Since(start)}, err
	}
	if err := checkNetID(st, p); err != nil {
		return nil, err
	}
	rec = &state.Record{Name: p.Network, NetID: p.NetID, File: file, Status: state.Creating,
		Created: time.Now().UTC(), Plan: p, Nodes: map[string]int{}}
	if err := st.Save(rec); err != nil {
		return nil, err
	}
	if err := create(st, rec, log); err != nil {
		if cerr := remove(st, rec); cerr != nil {
			err = errors.Join(err, fmt.Errorf("and removing what was created failed too (run `trellis down %s`): %w", p.Network, cerr))
		}
		return nil, err
	}
	rec.Status = state.Up
	if err := st.Save(rec); err != nil {
		return nil, err
	}
	return &Result{Created: true, Took: time.Since(start)}, nil
}

// checkNetID refuses a network whose derived id another network of this state directory has.
func checkNetID(st *state.Store, p *plan.Plan) error {
	recs, err := st.List()
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.NetID == p.NetID && r.Name != p.Network {
			return fmt.Errorf("network name %q derives the same device names as network %q; rename one of them", p.Network, r.Name)
		}
	}
	return nil
}

// update converges a network that exists: only rates may change in place.
func update(st *state.Store, rec *state.Record, p *plan.Plan) ([]string, error) {
	if rec.Status != state.Up {
		return nil, fmt.Errorf("network %s was interrupted while it was being created; run `trellis down %s`, then `trellis up` again", p.Network, p.Network)
	}
	if err := checkRunning(st, rec); err != nil {
		return nil, err
	}
	if !plan.SameExceptRates(rec.Plan, p) {
		return nil, fmt.Errorf("network %s is up with a different topology; only link rates change in place: run `trellis down %s` first to apply other changes", p.Network, p.Network)
	}
	var changed []string
	for i, l := range p.Links {
		old := rec.Plan.Links[i]
		if l.Rate == old.Rate {
			continue
		}
		if err := setLinkRate(l, p.Local); err != nil {
			return changed, fmt.Errorf("link %s: %w", l.Name, err)
		}
		old.Rate = l.Rate
		changed = append(changed, l.Name)
		if err := st.Save(rec); err != nil {
			return changed, err
		}
	}
	return changed, nil
}
