// Package placer places the cluster's networks onto its machines (docs/cluster.md). Any number
// of placers may run (`trellis placer`, or `trellis agent --placer`); one is leader, elected
// through etcd's concurrency package, and only the leader writes placements. It places every
// network that has no placement for its current generation, keeps placed nodes where they are,
// and when a machine's registration goes with its lease, places that machine's nodes again on
// the machines that are left. A pass writes its placements in batches, one transaction each
// (cluster.Store.PutPlacements), and every placement holds only if its network has not changed
// meanwhile and the placer still holds its election key (fenced leadership).
package placer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/spec"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// SessionTTL is the placer's election lease (Config.SessionTTL's default): a leader that dies
// is replaced this long after.
const SessionTTL = 5 * time.Second

// resyncEvery is how often the leader checks every network even when no watch fired.
const resyncEvery = 30 * time.Second

// Config is what a placer needs.
type Config struct {
	Store *cluster.Store
	ID    string // who this placer is, written as its candidacy (e.g. machine name and pid)
	Log   *slog.Logger
	// SessionTTL is the election lease, whole seconds (0: SessionTTL). A placer that runs in
	// an agent (`trellis agent --placer`) has the agent's lease: when its machine is lost, the
	// machine's nodes are placed again once both leases expired, so a longer election lease
	// would delay the failover (a leader's 5 s against the machine's 3 s lease was 2 s of it).
	SessionTTL time.Duration

	beforeWrite func(tenant, network string) // see placer.beforeWrite
}

// Run campaigns for leadership and, while leader, places networks, until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	log := cfg.Log.With("placer", cfg.ID)
	for ctx.Err() == nil {
		err := lead(ctx, cfg, log)
		if ctx.Err() != nil {
			return nil
		}
		log.Warn("not leading; campaigning again", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

// lead waits to be elected, then places until it loses its leadership (its session ended, or
// a write found its election key gone) or ctx ends. Every write of the pass goes through a
// store fenced with the election key (cluster.Fenced): a placer that lost its leadership
// without noticing, or whose write was computed before it lost it, writes nothing.
func lead(ctx context.Context, cfg Config, log *slog.Logger) error {
	// The session outlives ctx until Close, which revokes its lease: a placer that stops hands
	// over at once instead of after SessionTTL.
	sess, err := concurrency.NewSession(cfg.Store.Client(), concurrency.WithTTL(cfg.sessionSeconds()),
		concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return err
	}
	defer sess.Close()
	// Everything below ends with the session: a candidate whose session expired while it
	// waited (etcd lost its quorum) must not wake up as leader when the older keys go.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sess.Done():
			cancel()
		case <-sctx.Done():
		}
	}()
	el := concurrency.NewElection(sess, cluster.ElectionPrefix+"placer")
	if err := el.Campaign(sctx, cfg.ID); err != nil {
		return sessionErr(sess, err)
	}
	fence := cluster.Fence{Key: el.Key(), Rev: el.Rev()}
	defer func() {
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		el.Resign(rctx) // deletes the key only if it is still this term's
		rcancel()
	}()
	if err := holds(sctx, cfg.Store, fence); err != nil {
		return sessionErr(sess, err)
	}
	log.Info("leading", "term", fence.Rev)
	p := &placer{store: cfg.Store.Fenced(fence), term: fence.Rev, log: log, parsed: map[string]parsed{}, beforeWrite: cfg.beforeWrite}
	err = sessionErr(sess, p.loop(sctx))
	if errors.Is(err, cluster.ErrNotLeader) && ctx.Err() == nil {
		log.Warn("lost leadership: stopped writing", "term", fence.Rev, "err", err)
	}
	return err
}

// sessionSeconds is the election lease in whole seconds, at least 1 (etcd's leases are).
func (cfg Config) sessionSeconds() int {
	if cfg.SessionTTL <= 0 {
		return int(SessionTTL / time.Second)
	}
	return max(1, int((cfg.SessionTTL+time.Second-1)/time.Second))
}

// sessionErr is err, or ErrNotLeader if the session ended (its lease expired or was revoked).
func sessionErr(sess *concurrency.Session, err error) error {
	select {
	case <-sess.Done():
		return fmt.Errorf("%w: session %x ended (%v)", cluster.ErrNotLeader, sess.Lease(), err)
	default:
		return err
	}
}

// holds checks that the elected key is still there and the oldest candidate's: Campaign waits
// only for the older keys to go, and its own may have gone meanwhile (its lease expired).
func holds(ctx context.Context, s *cluster.Store, f cluster.Fence) error {
	resp, err := s.Client().Get(ctx, cluster.ElectionPrefix+"placer/", clientv3.WithFirstCreate()...)
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 || string(resp.Kvs[0].Key) != f.Key || resp.Kvs[0].CreateRevision != f.Rev {
		return fmt.Errorf("%w: elected with key %s of revision %d, which is no longer the oldest candidate's", cluster.ErrNotLeader, f.Key, f.Rev)
	}
	return nil
}

type placer struct {
	store *cluster.Store // fenced with the leadership: every write goes through it
	term  int64          // the election key's create revision (cluster.Fence.Rev), written into placements
	log   *slog.Logger
	// beforeWrite, if set, is called between computing a placement and writing it (tests).
	beforeWrite func(tenant, network string)
	parsed      map[string]parsed // network key -> its file parsed, at a revision
	// quota holds each tenant's quota and used what its placed networks take, in this pass:
	// a network written past the CLI's quota check (straight into etcd) is refused here.
	quota map[string]cluster.Quota
	used  map[string]cluster.Quota
	// vnis holds, in this pass, the tunnel keys' VXLAN ids (their low 24 bits) that placements
	// hold, by "TENANT/NETWORK" (tunnelKeys).
	vnis map[uint32]string
}

type parsed struct {
	rev int64
	n   *spec.Network
	err error
}

// loop runs a pass at once, then after every change of networks or machines (all the changes
// that arrive during a pass give one more pass: nextChange), and every resyncEvery.
func (p *placer) loop(ctx context.Context) error {
	cli := p.store.Client()
	wctx := clientv3.WithRequireLeader(ctx)
	nets := cli.Watch(wctx, cluster.NetworksPrefix, clientv3.WithPrefix())
	machines := cli.Watch(wctx, cluster.MachinesPrefix, clientv3.WithPrefix())
	tick := time.NewTicker(resyncEvery)
	defer tick.Stop()
	for {
		if err := p.pass(ctx); errors.Is(err, cluster.ErrNotLeader) {
			return err
		} else if err != nil {
			p.log.Warn("placing pass failed", "err", err)
		}
		if err := nextChange(ctx, nets, machines, tick.C); err != nil {
			return err
		}
	}
}

// pass places every network whose placement is missing, of an older generation, or puts
// nodes on machines that are gone.
func (p *placer) pass(ctx context.Context) error {
	machines, _, err := p.store.Machines(ctx)
	if err != nil {
		return err
	}
	places, _, err := p.store.Placements(ctx)
	if err != nil {
		return err
	}
	nets, seen, err := p.store.Networks(ctx, "")
	if err != nil {
		return err
	}
	tenants, err := p.store.Tenants(ctx)
	if err != nil {
		return err
	}
	p.quota, p.used = map[string]cluster.Quota{}, map[string]cluster.Quota{}
	p.vnis = heldKeys(places)
	for _, t := range tenants {
		p.quota[t.Name] = t.Quota
	}
	current := map[string]*cluster.Placement{}
	for _, pl := range places {
		current[pl.Tenant+"/"+pl.Network] = pl
	}
	live := map[string]*cluster.Machine{}
	for _, m := range machines {
		live[m.Name] = m
	}
	load := Load{}
	var todo []*cluster.Network
	for _, n := range nets {
		pl := current[n.Tenant+"/"+n.Name]
		sn := p.parse(n)
		if pl != nil && pl.Generation == n.Revision && pl.Refused == "" && sn.err == nil && settled(pl, sn.n, live) {
			LoadOf(sn.n, pl, load)
			p.used[n.Tenant] = p.used[n.Tenant].Add(cluster.UsageOf(sn.n))
			continue
		}
		todo = append(todo, n)
	}
	errs := []error{p.dropGone(ctx, nets, places, seen)}
	if errors.Is(errs[0], cluster.ErrNotLeader) {
		return errs[0] // the leadership went: nothing more is written
	}
	var writes []cluster.PlacementWrite
	for _, n := range todo {
		w, err := p.place(n, current[n.Tenant+"/"+n.Name], machines, load)
		if err != nil || w == nil {
			errs = append(errs, err)
			continue
		}
		writes = append(writes, *w)
	}
	for i, err := range p.store.PutPlacements(ctx, writes) {
		if errors.Is(err, cluster.ErrNotLeader) {
			return err
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.logPlaced(writes[i].Placement)
	}
	return errors.Join(errs...)
}

// dropGone removes the placements of networks that went (a tenant's down removes only its
// network), so that their agents take them down.
func (p *placer) dropGone(ctx context.Context, nets []*cluster.Network, places []*cluster.Placement, seen int64) error {
	exists := map[string]bool{}
	for _, n := range nets {
		exists[n.Tenant+"/"+n.Name] = true
	}
	var errs []error
	for _, pl := range places {
		if exists[pl.Tenant+"/"+pl.Network] {
			continue
		}
		if err := p.store.DropPlacement(ctx, pl, seen); errors.Is(err, cluster.ErrNotLeader) {
			return err
		} else if err != nil {
			errs = append(errs, err)
			continue
		}
		delete(p.parsed, cluster.NetworkKey(pl.Tenant, pl.Network))
		p.log.Info("network removed", "tenant", pl.Tenant, "network", pl.Network)
	}
	return errors.Join(errs...)
}

// settled tells whether placement pl still holds: every node placed on a live machine, or
// pinned by `host:` to the machine it is on, and the live machines' underlay addresses and
// endpoints as they registered (an agent started again with another address or endpoint gets
// its placements written again, with the nodes where they are).
func settled(pl *cluster.Placement, n *spec.Network, live map[string]*cluster.Machine) bool {
	for _, nd := range n.Nodes {
		m, ok := pl.Nodes[nd.Name]
		if !ok || (live[m] == nil && nd.Host != m) {
			return false
		}
	}
	for name, u := range pl.Machines {
		if m := live[name]; m != nil && (m.Address != u.Address || m.Endpoint != u.Endpoint) {
			return false
		}
	}
	return len(pl.Nodes) == len(n.Nodes)
}

func (p *placer) parse(n *cluster.Network) parsed {
	key := cluster.NetworkKey(n.Tenant, n.Name)
	if c, ok := p.parsed[key]; ok && c.rev == n.Revision {
		return c
	}
	read := func(path string) ([]byte, error) {
		if s, ok := n.Sources[path]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	sn, err := spec.ParseCluster(n.File, []byte(n.Source), read)
	c := parsed{rev: n.Revision, n: sn, err: err}
	p.parsed[key] = c
	return c
}

// place computes the placement of one network, counting it into load as if it were written
// (a write that fails leaves this pass's load a little high; the next pass counts again). It
// returns nil for a network refused already for the same reason.
func (p *placer) place(n *cluster.Network, prev *cluster.Placement, machines []*cluster.Machine, load Load) (*cluster.PlacementWrite, error) {
	pl := &cluster.Placement{Tenant: n.Tenant, Network: n.Name, Generation: n.Revision}
	sn := p.parse(n)
	var err error
	if pl.Secret, err = tunnelSecret(prev); err != nil {
		return nil, err
	}
	q, tenant := p.quota[n.Tenant] // a network of no tenant's (etcd without tenants) is granted all
	if sn.err != nil {
		err = sn.err
	} else if why := q.Refuses(sn.n); tenant && why != "" {
		err = fmt.Errorf("%w: tenant %s: %s", cluster.ErrNotGranted, n.Tenant, why)
	} else if over := q.Over(p.used[n.Tenant].Add(cluster.UsageOf(sn.n))); over != "" {
		err = fmt.Errorf("%w: tenant %s: %s", cluster.ErrOverQuota, n.Tenant, over)
	} else {
		pl.Nodes, pl.Machines, err = Compute(sn.n, machines, prev, load)
	}
	if err == nil {
		err = p.tunnelKeys(n, sn.n, pl, prev)
	}
	if err != nil {
		pl.Nodes, pl.Machines, pl.Refused = nil, nil, err.Error()
		if prev != nil && prev.Generation == n.Revision && prev.Refused == pl.Refused {
			return nil, nil // refused already, for the same reason
		}
	}
	var expect int64
	if prev != nil {
		expect = prev.Revision
	}
	pl.Term = p.term
	if p.beforeWrite != nil {
		p.beforeWrite(n.Tenant, n.Name)
	}
	if pl.Refused == "" {
		LoadOf(sn.n, pl, load)
		p.used[n.Tenant] = p.used[n.Tenant].Add(cluster.UsageOf(sn.n))
	}
	return &cluster.PlacementWrite{Placement: pl, Expect: expect}, nil
}

// logPlaced logs a placement written.
func (p *placer) logPlaced(pl *cluster.Placement) {
	if pl.Refused != "" {
		p.log.Info("network refused", "tenant", pl.Tenant, "network", pl.Network, "generation", pl.Generation, "why", pl.Refused)
		return
	}
	p.log.Info("network placed", "tenant", pl.Tenant, "network", pl.Network, "generation", pl.Generation, "nodes", pl.Nodes, "revision", pl.Revision)
}
