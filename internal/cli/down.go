package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/substrate"
)

func downCmd(store storeFunc) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "down NETWORK... | --all",
		Short: "Remove virtual networks and everything trellis created for them",
		Long: `Remove virtual networks: their nodes and every process in them, their ports, bridges,
shapers and eBPF programs, and their records. Works also on a network whose ` + "`up`" + ` was
interrupted or killed. Touches nothing that trellis did not create.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return errors.New("name the networks to remove, or give --all")
			}
			st, err := store()
			if err != nil {
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
	cmd.Flags().BoolVar(&all, "all", false, "remove every network of the state directory")
	return cmd
}
