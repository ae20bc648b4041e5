package agent

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
	"github.com/vishvananda/netlink"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// worker converges one network on the machine, one change at a time: a placement that arrives
// while it works replaces any that waits, so it always goes to the latest.
type worker struct {
	a                     *Agent
	name, tenant, network string
	kick                  chan struct{}

	mu      sync.Mutex
	latest  *cluster.Placement
	deleted bool

	// ended is when the network's last apply or removal on the machine ended (run's goroutine
	// only): a snapshot of the machine's devices taken later holds the network's as they are.
	ended time.Time

	rmu           sync.Mutex     // guards the two below: reports come from run and from the counters
	reported      cluster.Status // the last report, to write only what changed
	reportedLease clientv3.LeaseID
}

// set gives the worker the latest placement of its network (deleted: there is none).
func (w *worker) set(p *cluster.Placement, deleted bool) {
	w.mu.Lock()
	w.latest, w.deleted = p, deleted
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// run converges each placement it is given until ctx ends; a step that failed for a reason
// that may pass (etcd unreachable, the network locked by a trellis command) is tried again.
func (w *worker) run(ctx context.Context) {
	delay := 200 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		}
		w.mu.Lock()
		p, deleted := w.latest, w.deleted
		w.mu.Unlock()
		if err := w.converge(ctx, p, deleted); err != nil && ctx.Err() == nil {
			w.a.log.Warn("network not converged; trying again", "network", w.name, "err", err, "in", delay)
			time.AfterFunc(delay, func() { w.set(p, deleted) })
			delay = min(2*delay, 5*time.Second)
			continue
		}
		delay = 200 * time.Millisecond
	}
}

// converge makes the machine hold its part of placement p: the network's nodes placed here
// and its links' ends, or nothing when the placement is gone or puts nothing here.
func (w *worker) converge(ctx context.Context, p *cluster.Placement, deleted bool) error {
	st, me := w.a.cfg.State, w.a.cfg.Machine.Name
	if !deleted && p.Refused != "" {
		return nil // the network's new generation does not fit: the machine keeps what it has
	}
	if deleted || !p.OnMachine(me) {
		return w.remove(ctx)
	}
	n, err := w.a.cfg.Store.Network(ctx, w.tenant, w.network)
	if errors.Is(err, cluster.ErrNotFound) {
		return nil // removed; the placer drops its placement, which comes next
	}
	if err != nil {
		return err
	}
	if n.Revision != p.Generation {
		w.a.log.Info("placement is of an older generation of the network; waiting for the placer", "network", w.name, "placement", p.Generation, "network revision", n.Revision)
		return nil
	}
	status := cluster.Status{Tenant: w.tenant, Network: w.network, Machine: me, Generation: p.Generation, Placement: p.Revision}
	sn, err := Desired(n, p)
	if err == nil { // the VMs' images, from this machine's store (docs/cluster.md, VM images)
		err = sn.UseImages(filepath.Join(st.Dir, spec.ImageStore))
	}
	if err == nil {
		var res *substrate.Result
		// The generation's own file name: applied again (a restart, the same generation placed
		// anew), it keeps what the tenant set live (`link`); a new generation applies the file's.
		err = w.a.limit(ctx, func() (err error) {
			res, err = w.apply(ctx, func(ctx context.Context) (*substrate.Result, error) {
				// The apply's steps and their times go to the agent's log, with the network.
				opt := w.a.cfg.Substrate
				opt.Log = w.a.log.With("network", w.name, "generation", p.Generation)
				return substrate.UpKeepLive(ctx, st, sn, me, Source(w.tenant, w.network, p.Generation), opt)
			})
			return err
		})
		if later(err) {
			return err
		}
		if err == nil {
			status.Took = res.Took.Seconds()
			w.logResult(res)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped: the next start converges
		}
		status.State, status.Error = cluster.Failed, err.Error()
		w.a.log.Error("network failed", "network", w.name, "generation", p.Generation, "err", err)
	} else {
		status.State = cluster.Converged
		if rec, lerr := st.Load(sn.Name); lerr == nil && rec != nil && rec.Plan != nil {
			status.Nodes, status.Links = len(rec.Plan.Nodes), len(rec.Plan.Links)
		}
	}
	return w.report(ctx, &status)
}

// apply runs up with a snapshot of the machine's devices shared with the other networks'
// applies (substrate.WithSnapshot). If that fails for a reason that later does not cover, it
// runs up again once with none, listing the devices itself: the kernel may have deleted some of
// the network's since the snapshot (a node died and took its ports), which the apply found
// missing. Without a snapshot (the listing failed) it runs up once, listing itself.
func (w *worker) apply(ctx context.Context, up func(context.Context) (*substrate.Result, error)) (*substrate.Result, error) {
	defer func() { w.ended = time.Now() }()
	snap, err := w.a.snaps.after(w.ended)
	if err == nil {
		res, err := up(substrate.WithSnapshot(ctx, snap))
		if err == nil || later(err) || ctx.Err() != nil {
			return res, err
		}
		w.a.log.Warn("apply with the shared device listing failed; applying again with a listing of its own", "network", w.name, "err", err)
	}
	return up(ctx)
}

// later tells whether an apply that failed with err is tried again (run's backoff) rather
// than reported failed: a trellis command on the machine held the network, or the kernel
// interrupted every listing of the machine's devices (or addresses) that the apply made because
// they changed meanwhile, as the applies of the machine's other networks do while many of them
// converge at once (a failover). A failed report is final until the placement changes.
func later(err error) bool {
	return errors.Is(err, state.ErrBusy) || errors.Is(err, netlink.ErrDumpInterrupted)
}

func (w *worker) logResult(res *substrate.Result) {
	switch {
	case res.Created:
		w.a.log.Info("network created", "network", w.name, "nodes", res.Nodes, "links", res.Links, "took", res.Took.Round(time.Millisecond))
	case len(res.Changes) > 0:
		w.a.log.Info("network changed", "network", w.name, "changes", len(res.Changes), "took", res.Took.Round(time.Millisecond))
	}
}

// remove takes the network's part on this machine down, if there is one, and its report.
func (w *worker) remove(ctx context.Context) error {
	st := w.a.cfg.State
	rec, err := st.Load(w.name)
	if err != nil {
		return err
	}
	w.rmu.Lock()
	none := w.reportedLease == 0
	w.rmu.Unlock()
	if rec == nil && none {
		return nil
	}
	if rec != nil {
		err := w.a.limit(ctx, func() error { return substrate.Down(st, w.name) })
		w.ended = time.Now()
		if err != nil {
			return err
		}
		w.a.log.Info("network removed from the machine", "network", w.name)
	}
	if err := w.a.cfg.Store.DeleteStatus(ctx, w.tenant, w.network, w.a.cfg.Machine.Name); err != nil {
		return err
	}
	w.rmu.Lock()
	w.reported, w.reportedLease = cluster.Status{}, 0
	w.rmu.Unlock()
	return nil
}

// report writes the status if it differs from the last one written under the current lease
// (but for counters), with the ports' counters when the network converged.
func (w *worker) report(ctx context.Context, s *cluster.Status) error {
	w.rmu.Lock()
	defer w.rmu.Unlock()
	lease := w.a.currentLease()
	if lease == w.reportedLease && cluster.SameReport(&w.reported, s) {
		return nil
	}
	if s.State == cluster.Converged && w.a.cfg.CountersEvery > 0 {
		s.Ports = w.ports()
	}
	if err := w.a.cfg.Store.PutStatus(ctx, s, lease); err != nil {
		return err
	}
	w.reported, w.reportedLease = *s, lease
	return nil
}

// refreshCounters writes the last report again with the ports' counters read now, if they
// changed (an idle network writes nothing).
func (w *worker) refreshCounters(ctx context.Context) error {
	w.rmu.Lock()
	defer w.rmu.Unlock()
	lease := w.a.currentLease()
	if w.reported.State != cluster.Converged || w.reportedLease != lease {
		return nil
	}
	s := w.reported
	s.Ports = w.ports()
	if slices.Equal(s.Ports, w.reported.Ports) {
		return nil
	}
	if err := w.a.cfg.Store.PutStatus(ctx, &s, lease); err != nil {
		return err
	}
	w.reported = s
	return nil
}

// ports reads the counters of the network's ports on the machine (none if it cannot).
func (w *worker) ports() []cluster.Port {
	info, err := substrate.Inspect(w.a.cfg.State, w.name)
	if err != nil {
		return nil
	}
	var out []cluster.Port
	for _, l := range info.Links {
		for _, e := range l.Endpoints {
			if e.State == "missing" {
				continue
			}
			out = append(out, cluster.Port{Link: l.Name, Endpoint: e.Node + ":" + e.Interface,
				TxPackets: e.TxPackets, TxBytes: e.TxBytes, RxPackets: e.RxPackets, RxBytes: e.RxBytes, Drops: e.Drops})
		}
	}
	return out
}
