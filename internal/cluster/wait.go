package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrRefused: the placer found that the network does not fit.
var ErrRefused = errors.New("refused")

// ErrFailed: an agent could not apply the network on its machine.
var ErrFailed = errors.New("failed")

// ErrOvertaken: the generation a caller waits for was replaced (another up of the network) or
// removed (a down) before it converged: the cluster goes to the newer one, and the older will
// never converge.
var ErrOvertaken = errors.New("overtaken")

// Wait reads the network's progress when a watch says that its network, placement or a report
// of it changed (changes), and at least every pollEvery besides, in case the watch is slow to
// start or breaks; pollTimeout bounds the reads of one poll, so that a lost quorum ends the
// wait with ErrUnreachable rather than hold it. (Polling every 100 ms, each of the eight
// `up --cluster` of the cluster bench read etcd 30 times a second while it waited.)
const (
	pollEvery   = 500 * time.Millisecond
	pollTimeout = DialTimeout
)

// Progress is where a network stands in the cluster.
type Progress struct {
	Placement *Placement // nil: not placed yet
	Statuses  []*Status
	// Waiting lists the machines of the placement that have not reported the generation
	// converged with their nodes, to this placement (Status.Placement).
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
		if st.Generation == gen && st.State == Converged && st.Nodes == want[st.Machine] && (st.Placement == 0 || st.Placement >= pl.Revision) {
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
// (the placement says why), ErrFailed (naming the machine and its error), ErrOvertaken (the
// network changed again or went before gen converged: naming the generation it is at now) or
// ErrUnreachable (etcd did not answer one poll within pollTimeout: a lost quorum); ctx bounds it.
func (s *Store) Wait(ctx context.Context, tenant, name string, gen int64) (*Progress, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := s.changes(wctx, tenant, name)
	for {
		pr, err := s.poll(ctx, tenant, name, gen)
		if err != nil || pr.Done() {
			return pr, err
		}
		select {
		case <-ctx.Done():
			what := "no placement yet (is a placer running?)"
			if pr.Placement != nil {
				what = "waiting for " + strings.Join(pr.Waiting, ", ") + " (are their agents running?)"
			}
			return pr, fmt.Errorf("network %s, generation %d: not converged in time: %s", name, gen, what)
		case <-changed:
		case <-time.After(pollEvery):
		}
	}
}

// changes watches the network of tenant, its placement and its reports until ctx ends, and
// sends on the channel it returns (without blocking: one pending send says "changed since")
// when one of them changed, or when a watch broke (a lost leader: the poll that follows says
// whether etcd is unreachable).
func (s *Store) changes(ctx context.Context, tenant, name string) <-chan struct{} {
	out := make(chan struct{}, 1)
	wctx := clientv3.WithRequireLeader(ctx)
	nets := s.cli.Watch(wctx, NetworkKey(tenant, name))
	places := s.cli.Watch(wctx, PlacementKey(tenant, name))
	reports := s.cli.Watch(wctx, TenantPrefix(StatusPrefix, tenant), clientv3.WithPrefix())
	go func() {
		for nets != nil || places != nil || reports != nil {
			var wr clientv3.WatchResponse
			var ok bool
			select {
			case wr, ok = <-nets:
				if !ok || wr.Err() != nil {
					nets = nil
				}
			case wr, ok = <-places:
				if !ok || wr.Err() != nil {
					places = nil
				}
			case wr, ok = <-reports:
				if !ok || wr.Err() != nil {
					reports = nil
				}
			}
			if ok && wr.Err() == nil && !concerns(wr.Events, name) {
				continue // another network's report
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out
}

// concerns tells whether one of events is of network name: its network's or placement's key,
// or a report of it (status/TENANT/MACHINE/NETWORK).
func concerns(events []*clientv3.Event, name string) bool {
	for _, ev := range events {
		key := string(ev.Kv.Key)
		if !strings.HasPrefix(key, StatusPrefix) {
			return true // the network's or the placement's own key: nothing else is watched
		}
		if parts := splitKey(key, StatusPrefix); len(parts) == 3 && parts[2] == name {
			return true
		}
	}
	return false
}

// poll reads once where generation gen of the network stands, and says why waiting for it is
// over if it is: refused, failed on a machine, overtaken, or etcd unreachable.
func (s *Store) poll(ctx context.Context, tenant, name string, gen int64) (*Progress, error) {
	pctx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	pr, err := s.ProgressOf(pctx, tenant, name, gen)
	if err != nil {
		return nil, waitUnreachable(ctx, name, gen, err)
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
	// Not converged yet: is gen still the network's generation? Read after the progress, so a
	// generation that converged and was then replaced counts as converged.
	resp, err := s.cli.Get(pctx, NetworkKey(tenant, name), clientv3.WithKeysOnly())
	if err != nil {
		return nil, waitUnreachable(ctx, name, gen, unreachable(err, s.cli.Endpoints()))
	}
	switch {
	case len(resp.Kvs) == 0:
		return pr, fmt.Errorf("%w: network %s of tenant %s was removed (a down) before generation %d converged", ErrOvertaken, name, tenant, gen)
	case resp.Kvs[0].ModRevision != gen:
		return pr, fmt.Errorf("%w: network %s of tenant %s: generation %d was overtaken by generation %d (another up of the network) before it converged; "+
			"the cluster goes to generation %d (`trellis diff FILE` shows how it differs from this file)", ErrOvertaken, name, tenant, gen, resp.Kvs[0].ModRevision, resp.Kvs[0].ModRevision)
	}
	return pr, nil
}

// waitUnreachable says that waiting for generation gen stopped because etcd did not answer, or
// that the wait ran out (ctx), as Wait's other end says it.
func waitUnreachable(ctx context.Context, name string, gen int64, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("network %s, generation %d: not converged in time (etcd did not answer the last poll: %v)", name, gen, err)
	}
	return fmt.Errorf("network %s: generation %d was written, but waiting for it to converge stopped: %w", name, gen, err)
}
