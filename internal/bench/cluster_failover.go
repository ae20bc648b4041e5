package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
	"github.com/trellisnet/trellis/internal/cluster"
)

// failover loses the machine that holds the most nodes of networks c0..c(nets-1) and times
// until every network is placed on the others only and converged there.
func (r *runner) failover(bed *setup.ClusterBed, nets int) (*result.ClusterFailover, error) {
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Minute)
	defer cancel()
	count := map[string]int{}
	hit := map[string]map[string]bool{}
	for i := range nets {
		p, err := bed.Store.Placement(ctx, clusterTenant, fmt.Sprintf("c%d", i))
		if err != nil {
			return nil, err
		}
		for _, m := range p.Nodes {
			count[m]++
			if hit[m] == nil {
				hit[m] = map[string]bool{}
			}
			hit[m][p.Network] = true
		}
	}
	lost := 1
	for i := 1; i <= clusterMachines; i++ {
		if count[bed.Machine(i)] > count[bed.Machine(lost)] {
			lost = i
		}
	}
	name := bed.Machine(lost)
	fo := &result.ClusterFailover{Machine: name, Nodes: count[name], Networks: len(hit[name])}
	start := time.Now()
	bed.Lose(lost)
	for i := range nets {
		if err := waitPlaced(ctx, bed.Store, fmt.Sprintf("c%d", i), name); err != nil {
			return nil, err
		}
	}
	fo.PlacedSeconds = time.Since(start).Seconds()
	for i := range nets {
		if err := waitAway(ctx, bed.Store, fmt.Sprintf("c%d", i), name); err != nil {
			return nil, err
		}
	}
	fo.Seconds = time.Since(start).Seconds()
	return fo, nil
}

// waitPlaced waits until network net's placement puts no node on machine lost.
func waitPlaced(ctx context.Context, s *cluster.Store, net, lost string) error {
	for {
		p, err := s.Placement(ctx, clusterTenant, net)
		if err == nil && p != nil && !placedOn(p, lost) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("network %s not placed again without %s: %w (%v)", net, lost, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitAway waits until network net is placed on no node of machine lost and converged.
func waitAway(ctx context.Context, s *cluster.Store, net, lost string) error {
	for {
		n, err := s.Network(ctx, clusterTenant, net)
		if err != nil {
			return err
		}
		pr, err := s.ProgressOf(ctx, clusterTenant, net, n.Revision)
		if err == nil && pr.Done() && !placedOn(pr.Placement, lost) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("network %s not placed again and converged without %s: %w (progress %+v, %v)", net, lost, ctx.Err(), pr, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func placedOn(p *cluster.Placement, machine string) bool {
	for _, m := range p.Nodes {
		if m == machine {
			return true
		}
	}
	return false
}
