package cli

import (
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/substrate"
)

func lsCmd(store storeFunc) *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the virtual networks on this machine",
		Long: `List the virtual networks on this machine: their status, the machine's host name in a network
over several, their nodes (with how many are not running, e.g. after a crash: 'trellis up'
starts them again), links and file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
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
				if running, err := substrate.RunningNodes(st, r); err == nil && len(running) < len(r.Plan.Nodes) {
					nodes = fmt.Sprintf("%d (%d not running)", len(r.Plan.Nodes), len(r.Plan.Nodes)-len(running))
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", r.Name, r.Status, host, nodes, len(r.Plan.Links), r.File)
			}
			return w.Flush()
		},
	}
}
