package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/substrate"
)

func lsCmd(store storeFunc) *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the virtual networks on this machine (with --cluster: the tenant's in the cluster)",
		Long: `List the virtual networks on this machine: their status, the machine's host name in a network
over several, their nodes (with how many are not running, e.g. after a crash, or run only in
part, a VM node's engine VM gone: 'trellis up' starts them again), links and file. With --cluster: the tenant's networks in the cluster, with
their status, generation and nodes per machine.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cs, err := clusterOf(cmd); cs != nil || err != nil {
				if err != nil {
					return err
				}
				defer cs.store.Close()
				return clusterLs(cmd, cs)
			}
			st, err := store()
			if err != nil {
				return err
			}
			recs, err := st.List()
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NETWORK\tSTATUS\tHOST\tNODES\tLINKS\tFILE")
			for _, r := range recs {
				host := r.Plan.Host
				if host == "" {
					host = "-"
				}
				nodes := strconv.Itoa(len(r.Plan.Nodes))
				if running, err := substrate.RunningNodes(st, r); err == nil {
					nodes += notRunning(r.Plan.Nodes, running)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", r.Name, r.Status, host, nodes, len(r.Plan.Links), r.File)
			}
			return w.Flush()
		},
	}
}

// notRunning says how many of nodes are not running, or only in part (an engine VM is gone):
// " (1 not running)", " (1 in part)", or "".
func notRunning(nodes []*plan.Node, running map[string]kinds.Instance) string {
	var gone, part int
	for _, n := range nodes {
		in, ok := running[n.Name]
		switch {
		case !ok:
			gone++
		case in.Digest == kinds.PartGone:
			part++
		}
	}
	var what []string
	if gone > 0 {
		what = append(what, fmt.Sprintf("%d not running", gone))
	}
	if part > 0 {
		what = append(what, fmt.Sprintf("%d in part", part))
	}
	if len(what) == 0 {
		return ""
	}
	return " (" + strings.Join(what, ", ") + ")"
}
