// Package agent is `trellis agent`: the part of a cluster that runs on each machine
// (docs/cluster.md). It registers the machine with its capacity under an etcd lease kept alive,
// watches the placements that put nodes on its machine and converges the machine to each with
// the same reconciler as `trellis up` (internal/substrate), and reports per-network status.
// Started again, it finds what runs already and leaves it alone; while etcd cannot be reached it
// changes nothing, so every network keeps forwarding, and it catches up when etcd is back.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/substrate"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultLeaseTTL is the lease of a machine's registration: a machine whose agent stops
// renewing it is taken as lost this long after (the goal: within 10 s).
const DefaultLeaseTTL = 5 * time.Second

// Config is what an agent needs.
type Config struct {
	Store    *cluster.Store
	Machine  cluster.Machine // name, underlay and capacity, as registered
	State    *state.Store    // the machine's state directory
	LeaseTTL time.Duration   // 0: DefaultLeaseTTL
	Log      *slog.Logger
	// Listener, if set, serves exec and link (ExecPath, LinkPath) to the networks' tenants: a
	// TLS listener that requires client certificates (pki.Files.ServerConfig). Its URL is
	// Machine.Endpoint.
	Listener net.Listener
	// CountersEvery is how often the agent reads its networks' port counters into their status
	// reports (written only when they changed); 0: never.
	CountersEvery time.Duration
	// Parallel is how many networks the agent applies (or takes down) at once; 0: one per
	// core. Each apply creates its nodes and links with workers of its own (substrate), so a
	// few at once keep the machine busy; more only share the same cores (8 applies at once
	// each took 8 times as long as one alone) and delay every network's convergence.
	Parallel int
	// Substrate is the machine's choices for its networks (port namespaces, delay way, port
	// hook); the agent sets the logger of each apply itself.
	Substrate substrate.Options
}

// Agent converges one machine to the cluster's placements.
type Agent struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	lease   clientv3.LeaseID // the registration's; status reports are bound to it
	workers map[string]*worker
	wg      sync.WaitGroup
	slots   chan struct{} // one per apply under way (Config.Parallel)
	snaps   *snapshots    // the machine's devices, one listing shared by many applies
}

// Run registers the machine and converges it until ctx ends, then stops renewing the
// registration and returns. The machine's networks keep running; if no agent is back on the
// machine before the lease expires, the placer moves its nodes. Only a registration that is refused for good (the name is another
// agent's) is an error; etcd being unreachable is waited out.
func Run(ctx context.Context, cfg Config) error {
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	a := newAgent(cfg)
	reg, err := a.register(ctx)
	if err != nil {
		return err
	}
	if cfg.Listener != nil {
		a.wg.Add(1)
		go func() { defer a.wg.Done(); a.serve(ctx, cfg.Listener) }()
	}
	if cfg.CountersEvery > 0 {
		a.wg.Add(1)
		go func() { defer a.wg.Done(); a.countLoop(ctx) }()
	}
	relist := make(chan struct{}, 1)
	go a.keepRegistered(ctx, reg, relist)
	a.sync(ctx, relist)
	a.wg.Wait()
	return nil
}

func newAgent(cfg Config) *Agent {
	if cfg.Parallel <= 0 {
		cfg.Parallel = runtime.NumCPU()
	}
	return &Agent{cfg: cfg, log: cfg.Log.With("machine", cfg.Machine.Name), workers: map[string]*worker{},
		slots: make(chan struct{}, cfg.Parallel), snaps: newSnapshots(cfg.State)}
}

// limit runs f when fewer than Config.Parallel others run (applies of the machine's networks),
// or returns ctx's error if ctx ends first.
func (a *Agent) limit(ctx context.Context, f func() error) error {
	select {
	case a.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-a.slots }()
	return f()
}

// leaseFile keeps the registration's lease in the state directory, so that an agent started
// again before the lease expired takes its registration back instead of being refused.
func (a *Agent) leaseFile() string {
	return filepath.Join(a.cfg.State.Dir, "agent-"+a.cfg.Machine.Name+".lease")
}

// register registers the machine, retrying while etcd cannot be reached.
func (a *Agent) register(ctx context.Context) (*cluster.Registration, error) {
	m := a.cfg.Machine
	if data, err := os.ReadFile(a.leaseFile()); err == nil {
		if id, err := strconv.ParseInt(string(data), 16, 64); err == nil {
			m.Lease = clientv3.LeaseID(id)
		}
	}
	for delay := 200 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		reg, err := a.cfg.Store.Register(ctx, &m, a.cfg.LeaseTTL)
		if err == nil {
			a.mu.Lock()
			a.lease = reg.Lease
			a.mu.Unlock()
			if err := os.WriteFile(a.leaseFile(), []byte(strconv.FormatInt(int64(reg.Lease), 16)), 0o600); err != nil {
				return nil, err
			}
			a.log.Info("registered", "lease", fmt.Sprintf("%x", int64(reg.Lease)), "address", m.Address, "cores", m.Cores, "memory", m.Memory)
			return reg, nil
		}
		if errors.Is(err, cluster.ErrMachineTaken) || errors.Is(err, cluster.ErrBadName) {
			return nil, err
		}
		a.log.Warn("cannot register, retrying", "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
	}
}

// keepRegistered registers the machine again when its lease is lost (etcd was unreachable for
// longer than the lease), and then has every network's status reported again under the new
// lease. When ctx ends it stops renewing the lease and leaves the lease file: an agent started
// again before the lease expires (a restart, an upgrade) takes the registration back, and no
// node moves.
func (a *Agent) keepRegistered(ctx context.Context, reg *cluster.Registration, relist chan<- struct{}) {
	for {
		select {
		case <-ctx.Done():
			reg.Stop() // the lease runs out by itself, unless the agent is back before
			return
		case <-reg.Lost:
		}
		// The lease may well live on: etcd extends every lease when it elects a leader, so
		// the registration is taken back with it if it does (the lease file still names it).
		a.log.Warn("lease not renewed for its whole time (etcd unreachable); registering again")
		next, err := a.register(ctx)
		if err != nil {
			if ctx.Err() == nil {
				a.log.Error("cannot register again", "err", err)
			}
			return
		}
		reg = next
		select {
		case relist <- struct{}{}:
		default:
		}
	}
}

func (a *Agent) currentLease() clientv3.LeaseID {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lease
}

// countLoop refreshes the port counters of every network's report every CountersEvery.
func (a *Agent) countLoop(ctx context.Context) {
	tick := time.NewTicker(a.cfg.CountersEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		a.mu.Lock()
		workers := make([]*worker, 0, len(a.workers))
		for _, w := range a.workers {
			workers = append(workers, w)
		}
		a.mu.Unlock()
		for _, w := range workers {
			if err := w.refreshCounters(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("cannot report counters", "network", w.name, "err", err)
			}
		}
	}
}
