package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/substrate"
)

func downCmd(store storeFunc) *cobra.Command {
	var (
		all  bool
		wait time.Duration
	)
	cmd := &cobra.Command{
		Use:   "down NETWORK|FILE... | --all",
		Short: "Remove virtual networks and everything trellis created for them",
		Long: `Remove virtual networks: their nodes and every process in them, their ports, bridges,
shapers and eBPF programs, and their records. Works also on a network whose ` + "`up`" + ` was
interrupted or killed. Touches nothing that trellis did not create. A FILE (an argument with a
'.' or a '/', which no network's name has) names the network of that topology file, trellis's or
containerlab's (its name: key), unless a network of the state directory has that very name (a
cluster machine's networks are named TENANT.NETWORK). With --cluster, removes them
from the cluster and waits until every agent has taken them off its machine.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return errors.New("name the networks to remove, or give --all")
			}
			if cs, err := clusterOf(cmd); cs != nil || err != nil {
				if err != nil {
					return err
				}
				defer cs.store.Close()
				if err := networkNames(args, nil); err != nil {
					return err
				}
				return clusterDown(cmd, cs, args, all, wait)
			}
			st, err := store()
			if err != nil {
				return err
			}
			// A cluster machine's agent names its records TENANT.NETWORK.
			if err := networkNames(args, func(name string) bool {
				r, err := st.Load(name)
				return err == nil && r != nil
			}); err != nil {
				return err
			}
			if all {
				recs, err := st.List()
				if err != nil {
					return err
				}
				for _, r := range recs {
					args = append(args, r.Name)
				}
			}
			var errs []error
			for _, name := range args {
				if err := substrate.Down(st, name); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "network %s is down\n", name)
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "remove every network of the state directory (with --cluster: of the tenant)")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "with --cluster: how long to wait for every machine to remove it")
	return cmd
}
