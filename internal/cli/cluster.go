package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/clab"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/spec"
)

// clusterFlag is the persistent flag that sends a command to a cluster instead of this
// machine: --cluster FILE, a context file (default $TRELLIS_CLUSTER).
const clusterFlag = "cluster"

func addClusterFlag(root *cobra.Command) {
	root.PersistentFlags().String(clusterFlag, os.Getenv("TRELLIS_CLUSTER"), "send up, diff, down, ls, inspect, exec and link (and serve its API) to the cluster of this context file "+
		"(e.g. "+cluster.DefaultContextFile()+"; default $TRELLIS_CLUSTER; see docs/cluster.md) instead of this machine")
}

// clusterVerbs are the commands that --cluster sends to a cluster.
var clusterVerbs = map[string]bool{"up": true, "diff": true, "down": true, "ls": true, "inspect": true, "exec": true, "link": true, "serve": true}

// ownConnection are the commands that take no context file: they have flags of their own, or
// talk to no cluster.
var ownConnection = map[string]bool{"agent": true, "placer": true, "image": true, "help": true, "completion": true, "trellis": true}

// checkClusterVerb refuses --cluster on a command that does not work on a cluster (yet), rather
// than run it on this machine.
func checkClusterVerb(cmd *cobra.Command, args []string) error {
	if cmd.HasParent() && (cmd.Parent().Name() == "tenant" || cmd.Parent().Name() == "machine") {
		return nil // the tenant and machine commands take the administrator's context file
	}
	if path, _ := cmd.Flags().GetString(clusterFlag); path != "" && !clusterVerbs[cmd.Name()] && !ownConnection[cmd.Name()] {
		return fmt.Errorf("trellis %s does not work on a cluster yet (--cluster works with up, diff, down, ls, inspect, exec, link and serve)", cmd.Name())
	}
	return nil
}

// clusterSession is a command's connection to its cluster, as its context file's tenant.
type clusterSession struct {
	store  *cluster.Store
	tenant string
	cc     *cluster.Context
}

// clusterOf returns the cluster the command is sent to, or nil without --cluster.
func clusterOf(cmd *cobra.Command) (*clusterSession, error) {
	path, _ := cmd.Flags().GetString(clusterFlag)
	if path == "" {
		return nil, nil
	}
	cc, err := cluster.LoadContext(path)
	if err != nil {
		return nil, err
	}
	s, err := cluster.Dial(cmd.Context(), cc.Config())
	if err != nil {
		return nil, err
	}
	return &clusterSession{store: s, tenant: cc.Tenant, cc: cc}, nil
}

// readClusterFile reads and checks a topology file for a cluster, with the files its
// `source:` lines name, which go to etcd with it (the agents have no access to this machine).
func readClusterFile(tenant, path string) (*spec.Network, *cluster.Network, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, err
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, nil, fmt.Errorf("reading topology file: %w", err)
	}
	if clab.Detect(abs, data) {
		return nil, nil, fmt.Errorf("%s: a containerlab file, which --cluster does not take yet; run `trellis convert %s > FILE.yaml` in its directory and give FILE.yaml", path, path)
	}
	sources := map[string]string{}
	read := func(p string) ([]byte, error) {
		b, err := spec.ReadSource(p)
		if err == nil {
			sources[p] = string(b)
		}
		return b, err
	}
	sn, err := spec.ParseCluster(abs, data, read)
	if err != nil {
		return nil, nil, err
	}
	return sn, &cluster.Network{Tenant: tenant, Name: sn.Name, File: abs, Source: string(data), Sources: sources}, nil
}

// current returns the network as the cluster has it (nil, 0 if it has none), parsed.
func (cs *clusterSession) current(ctx context.Context, name string) (*cluster.Network, *spec.Network, error) {
	n, err := cs.store.Network(ctx, cs.tenant, name)
	if errors.Is(err, cluster.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	read := func(p string) ([]byte, error) {
		if s, ok := n.Sources[p]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	sn, err := spec.ParseCluster(n.File, []byte(n.Source), read)
	return n, sn, err
}

// clusterUp writes the network to the cluster and waits until every machine of its placement
// has converged. A network that does not fit is taken back: a new one is removed, a changed
// one gets its former file back, and keeps running as it was. The times it prints count from
// start, when the command began (connecting to etcd included).
func clusterUp(cmd *cobra.Command, cs *clusterSession, path string, wait time.Duration, start time.Time) error {
	ctx := cmd.Context()
	sn, n, err := readClusterFile(cs.tenant, path)
	if err != nil {
		return err
	}
	old, oldSpec, err := cs.current(ctx, n.Name)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	var expect int64
	if old != nil {
		expect = old.Revision
		if old.Source == n.Source && fmt.Sprint(old.Sources) == fmt.Sprint(n.Sources) {
			fmt.Fprintf(out, "network %s is up to date: nothing changed\n", n.Name)
			return nil
		}
	}
	gen, err := cs.store.Up(ctx, n, expect)
	if err != nil {
		return err
	}
	committed := time.Since(start)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	pr, err := cs.store.Wait(wctx, cs.tenant, n.Name, gen)
	if errors.Is(err, cluster.ErrRefused) {
		return takeBack(ctx, cs, n.Name, old, gen, err)
	}
	if err != nil {
		return err
	}
	took := fmt.Sprintf("committed in %.2fs, converged in %.2fs", committed.Seconds(), time.Since(start).Seconds())
	if old == nil {
		fmt.Fprintf(out, "network %s is up on %d machines: %s (%s)\n", n.Name, len(pr.Placement.Machines), perMachine(pr.Placement), took)
		return nil
	}
	fmt.Fprintf(out, "network %s changed (%s), on %s:\n", n.Name, took, perMachine(pr.Placement))
	for _, c := range cluster.DiffSpecs(oldSpec, sn) {
		fmt.Fprintf(out, "  %s\n", c)
	}
	return nil
}

// takeBack undoes an up the placer refused: nothing of a new network was created, and a
// changed one gets its former file again (the placer keeps its nodes where they are).
func takeBack(ctx context.Context, cs *clusterSession, name string, old *cluster.Network, gen int64, cause error) error {
	if old == nil {
		if err := cs.store.Down(ctx, cs.tenant, name, gen); err != nil {
			return errors.Join(cause, fmt.Errorf("and removing it failed (run `trellis down --cluster %s`): %w", name, err))
		}
		return fmt.Errorf("%w; nothing was created", cause)
	}
	if _, err := cs.store.Up(ctx, old, gen); err != nil {
		return errors.Join(cause, fmt.Errorf("and putting the former file back failed: %w", err))
	}
	return fmt.Errorf("%w; the network keeps running as it was", cause)
}

// perMachine says how many nodes each machine of a placement holds: "m1 (2 nodes), m2 (1 node)".
func perMachine(p *cluster.Placement) string {
	count := map[string]int{}
	for _, m := range p.Nodes {
		count[m]++
	}
	s := ""
	for _, m := range sortedKeys(count) {
		if s != "" {
			s += ", "
		}
		unit := "nodes"
		if count[m] == 1 {
			unit = "node"
		}
		s += fmt.Sprintf("%s (%d %s)", m, count[m], unit)
	}
	return s
}
