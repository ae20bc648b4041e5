package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
	"github.com/trellisnet/trellis/internal/cluster"
)

// PartCluster times a cluster (docs/cluster.md): 3 simulated machines, each with an agent, a
// 3-member etcd and a placer. It is opt-in (not in a default run): it needs the etcd binary
// that scripts/setup.sh builds.
const PartCluster = "cluster"

// Sizes of the cluster part.
const (
	clusterMachines = 3
	clusterNodes    = 10              // nodes of each network, a chain
	clusterLease    = 3 * time.Second // the agents' lease: how soon a lost machine counts as gone
	clusterParallel = 8               // `up --cluster` commands at once
)

// clusterTenant is the tenant of the part's networks (the --cluster file's).
const clusterTenant = "bench"

// cluster measures the time from `trellis --cluster up` to every agent converged for one
// network and for ClusterNetworks networks of clusterNodes nodes, etcd's writes per network,
// and the failover time after the machine holding the most nodes is lost.
func (r *runner) cluster() error {
	g := r.h.NewRig("cluster")
	defer func() { r.closeRig(g) }()
	bed, err := r.h.NewCluster(g, clusterMachines, clusterLease)
	if err != nil {
		return err
	}
	res := &result.ClusterResult{Machines: clusterMachines, Nodes: clusterNodes, LeaseSeconds: clusterLease.Seconds(),
		Parallel: clusterParallel, Quick: r.opt.Quick, Load1: load1()}
	next := 0
	for _, n := range []int{1, r.opt.ClusterNetworks} {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("c%d", next)
			next++
		}
		step, err := r.clusterUp(bed, names)
		if err != nil {
			return err
		}
		res.Up = append(res.Up, step)
		r.logf("   %d network(s) of %d nodes: up --cluster to every agent converged %.2fs, %.1f etcd writes per network\n",
			n, clusterNodes, step.Seconds, step.WritesPerNetwork)
	}
	fo, err := r.failover(bed, next)
	if err != nil {
		return err
	}
	res.Failover = fo
	r.logf("   machine %s lost (%d nodes of %d networks): placed again after %.2fs and converged after %.2fs (lease %gs)\n",
		fo.Machine, fo.Nodes, fo.Networks, fo.PlacedSeconds, fo.Seconds, res.LeaseSeconds)
	r.rep.Cluster = res
	return nil
}

// closeRig closes g and logs a failure, which a part's own error would hide.
func (r *runner) closeRig(g *setup.Rig) {
	if err := g.Close(); err != nil {
		r.note("cluster part: cleanup: %v", err)
	}
}

// clusterUp runs `up --cluster` of each network (clusterParallel at once; each waits until its
// agents converged) and counts etcd's revisions over the whole.
func (r *runner) clusterUp(bed *setup.ClusterBed, names []string) (result.ClusterUp, error) {
	files := make([]string, len(names))
	for i, name := range names {
		files[i] = filepath.Join(r.h.Work, name+".yaml")
		if err := os.WriteFile(files[i], chainTopology(name, clusterNodes), 0o644); err != nil {
			return result.ClusterUp{}, err
		}
	}
	rev0, err := revision(r.ctx, bed.Store)
	if err != nil {
		return result.ClusterUp{}, err
	}
	start := time.Now()
	errs := make([]error, len(files))
	sem := make(chan struct{}, clusterParallel)
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = bed.Trellis("up", f)
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return result.ClusterUp{}, err
	}
	rev1, err := revision(r.ctx, bed.Store)
	if err != nil {
		return result.ClusterUp{}, err
	}
	return result.ClusterUp{Networks: len(names), Seconds: took.Seconds(), Writes: rev1 - rev0,
		WritesPerNetwork: float64(rev1-rev0) / float64(len(names))}, nil
}

// revision is etcd's current revision: one more per write (a transaction of several puts is one).
func revision(ctx context.Context, s *cluster.Store) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := s.Client().Get(ctx, "/trellis-bench-revision")
	if err != nil {
		return 0, fmt.Errorf("etcd revision: %w", err)
	}
	return resp.Header.Revision, nil
}
