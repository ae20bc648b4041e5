package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func lsCmd(store storeFunc) *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the virtual networks on this machine (with --cluster: the tenant's in the cluster)",
		Args:  cobra.NoArgs,
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
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", r.Name, r.Status, host, len(r.Plan.Nodes), len(r.Plan.Links), r.File)
			}
			return w.Flush()
		},
	}
}
