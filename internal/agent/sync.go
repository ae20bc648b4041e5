package agent

import (
	"context"
	"time"

	"github.com/trellisnet/trellis/internal/cluster"
)

// sync lists every placement, hands each network to its worker, and then follows the changes
// with a watch. When the watch breaks (etcd lost its leader, became unreachable, or compacted
// the history), or relist says the registration was made anew, it lists again. While nothing
// can be listed, nothing is changed on the machine: the networks keep forwarding.
func (a *Agent) sync(ctx context.Context, relist <-chan struct{}) {
	delay := 200 * time.Millisecond
	for ctx.Err() == nil {
		placements, rev, err := a.cfg.Store.Placements(ctx)
		if err != nil {
			a.log.Warn("cannot list placements; the machine keeps what it has", "err", err, "retry in", delay)
			select {
			case <-ctx.Done():
			case <-time.After(delay):
			}
			delay = min(2*delay, 5*time.Second)
			continue
		}
		delay = 200 * time.Millisecond
		a.resync(ctx, placements)
		a.follow(ctx, rev, relist)
	}
}

// resync hands every listed placement to its network's worker, and tells the workers of
// networks that have no placement any more (or that the machine holds from before, without
// a placement) that theirs is gone.
func (a *Agent) resync(ctx context.Context, placements []*cluster.Placement) {
	seen := map[string]bool{}
	for _, p := range placements {
		name := LocalName(p.Tenant, p.Network)
		seen[name] = true
		a.dispatch(ctx, name, p, false)
	}
	recs, err := a.cfg.State.List()
	if err != nil {
		a.log.Error("cannot list the state directory", "err", err)
	}
	for _, r := range recs {
		tenant, network, ok := splitLocal(r.Name)
		if ok && !seen[r.Name] {
			a.dispatch(ctx, r.Name, &cluster.Placement{Tenant: tenant, Network: network}, true)
		}
	}
	a.mu.Lock()
	for name, w := range a.workers {
		if !seen[name] {
			w.set(&cluster.Placement{Tenant: w.tenant, Network: w.network}, true)
		}
	}
	a.mu.Unlock()
}

// follow dispatches the placements' changes after revision rev until the watch breaks, ctx
// ends or relist fires.
func (a *Agent) follow(ctx context.Context, rev int64, relist <-chan struct{}) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := a.cfg.Store.WatchPlacements(wctx, rev)
	for {
		select {
		case <-relist:
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.Err != nil {
				a.log.Warn("watch of placements broke; listing again", "err", ev.Err)
				return
			}
			p := ev.Placement
			a.dispatch(ctx, LocalName(p.Tenant, p.Network), p, ev.Deleted)
		}
	}
}

// dispatch gives a placement to the worker of its network, starting the worker if need be.
func (a *Agent) dispatch(ctx context.Context, name string, p *cluster.Placement, deleted bool) {
	a.mu.Lock()
	w := a.workers[name]
	if w == nil {
		w = &worker{a: a, name: name, tenant: p.Tenant, network: p.Network, kick: make(chan struct{}, 1)}
		a.workers[name] = w
		a.wg.Add(1)
		go func() { defer a.wg.Done(); w.run(ctx) }()
	}
	a.mu.Unlock()
	w.set(p, deleted)
}
