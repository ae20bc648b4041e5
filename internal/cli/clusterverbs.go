package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/cluster"
)

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// clusterDiff shows what `up --cluster FILE` would change, against the network in the cluster.
func clusterDiff(cmd *cobra.Command, cs *clusterSession, path string, asJSON bool) error {
	sn, n, err := readClusterFile(cs.tenant, path)
	if err != nil {
		return err
	}
	_, oldSpec, err := cs.current(cmd.Context(), n.Name)
	if err != nil {
		return err
	}
	changes := cluster.DiffSpecs(oldSpec, sn)
	out := cmd.OutOrStdout()
	if asJSON {
		if changes == nil {
			changes = []string{}
		}
		return json.NewEncoder(out).Encode(changes)
	}
	if len(changes) == 0 {
		fmt.Fprintf(out, "network %s: no changes\n", n.Name)
	}
	for _, c := range changes {
		fmt.Fprintln(out, c)
	}
	return nil
}

// clusterDown removes networks from the cluster and waits until no machine holds them.
func clusterDown(cmd *cobra.Command, cs *clusterSession, names []string, all bool, wait time.Duration) error {
	ctx := cmd.Context()
	if all {
		nets, _, err := cs.store.Networks(ctx, cs.tenant)
		if err != nil {
			return err
		}
		for _, n := range nets {
			names = append(names, n.Name)
		}
	}
	var errs []error
	for _, name := range names {
		if err := cs.store.Down(ctx, cs.tenant, name, 0); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := cs.waitGone(ctx, name, wait); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(cmd.OutOrStdout(), "network %s is down\n", name)
	}
	return errors.Join(errs...)
}

// waitGone waits until no machine reports network name any more. Each poll waits at most
// cluster.DialTimeout for etcd, so a quorum lost meanwhile ends it with ErrUnreachable.
func (cs *clusterSession) waitGone(ctx context.Context, name string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		pctx, cancel := context.WithTimeout(ctx, cluster.DialTimeout)
		sts, err := cs.store.Statuses(pctx, cs.tenant, name)
		cancel()
		if err != nil {
			return fmt.Errorf("network %s was removed from the cluster, but waiting for its machines to let it go stopped: %w", name, err)
		}
		if len(sts) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var on []string
			for _, st := range sts {
				on = append(on, st.Machine)
			}
			return fmt.Errorf("network %s was removed from the cluster, but %v still hold it after %v (are their agents running?)", name, on, wait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// clusterLs lists the tenant's networks in the cluster.
func clusterLs(cmd *cobra.Command, cs *clusterSession) error {
	ctx := cmd.Context()
	nets, _, err := cs.store.Networks(ctx, cs.tenant)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NETWORK\tSTATUS\tGENERATION\tMACHINES\tSENT\tFILE")
	for _, n := range nets {
		pr, err := cs.store.ProgressOf(ctx, cs.tenant, n.Name, n.Revision)
		if err != nil {
			return err
		}
		machines := "-"
		if pr.Placement != nil && len(pr.Placement.Nodes) > 0 {
			machines = perMachine(pr.Placement)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", n.Name, pr.State(n.Revision), n.Revision, machines, sent(pr.Statuses), n.File)
	}
	return w.Flush()
}

// sent sums what the network's ports sent, as the machines last reported: "1234 pkts, 96 KiB"
// ("-" before any report of counters).
func sent(sts []*cluster.Status) string {
	var pkts, bytes uint64
	counted := false
	for _, st := range sts {
		for _, p := range st.Ports {
			pkts, bytes, counted = pkts+p.TxPackets, bytes+p.TxBytes, true
		}
	}
	if !counted {
		return "-"
	}
	return fmt.Sprintf("%d pkts, %d KiB", pkts, bytes>>10)
}

// clusterInfo is what `inspect --cluster` shows of a network.
type clusterInfo struct {
	Name       string             `json:"name"`
	Tenant     string             `json:"tenant"`
	File       string             `json:"file"`
	Generation int64              `json:"generation"`
	Status     string             `json:"status"`
	Refused    string             `json:"refused,omitempty"`
	Nodes      map[string]string  `json:"nodes"` // node -> machine
	Machines   []*cluster.Status  `json:"machines"`
	Placement  *cluster.Placement `json:"-"`
}

// clusterInspect shows where a network's nodes run and what each machine reports.
func clusterInspect(cmd *cobra.Command, cs *clusterSession, name string, asJSON bool) error {
	ctx := cmd.Context()
	n, err := cs.store.Network(ctx, cs.tenant, name)
	if err != nil {
		return err
	}
	pr, err := cs.store.ProgressOf(ctx, cs.tenant, name, n.Revision)
	if err != nil {
		return err
	}
	info := &clusterInfo{Name: n.Name, Tenant: n.Tenant, File: n.File, Generation: n.Revision, Status: pr.State(n.Revision),
		Nodes: map[string]string{}, Machines: pr.Statuses}
	if pr.Placement != nil {
		info.Nodes, info.Refused = pr.Placement.Nodes, pr.Placement.Refused
	}
	if info.Machines == nil {
		info.Machines = []*cluster.Status{}
	}
	out := cmd.OutOrStdout()
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "network %s of tenant %s (generation %d, %s) from %s\n", n.Name, n.Tenant, n.Revision, info.Status, n.File)
	if info.Refused != "" {
		fmt.Fprintf(w, "refused: %s\n", info.Refused)
	}
	fmt.Fprintf(w, "\nNODE\tMACHINE\n")
	for _, nd := range sortedKeys(info.Nodes) {
		fmt.Fprintf(w, "%s\t%s\n", nd, info.Nodes[nd])
	}
	fmt.Fprintf(w, "\nMACHINE\tSTATE\tGENERATION\tNODES\tLINKS\tTOOK\tERROR\n")
	for _, st := range info.Machines {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%.3fs\t%s\n", st.Machine, st.State, st.Generation, st.Nodes, st.Links, st.Took, st.Error)
	}
	fmt.Fprintf(w, "\nMACHINE\tLINK\tENDPOINT\tTX PKTS\tTX BYTES\tRX PKTS\tRX BYTES\tDROPS\tAS OF\n")
	for _, st := range info.Machines {
		for _, p := range st.Ports {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", st.Machine, p.Link, p.Endpoint, p.TxPackets, p.TxBytes, p.RxPackets, p.RxBytes, p.Drops,
				st.Time.Local().Format(time.TimeOnly))
		}
	}
	return w.Flush()
}
