package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/substrate"
)

func diffCmd(store storeFunc, mo *machineOptions) *cobra.Command {
	var (
		host   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "diff FILE",
		Short: "Show what `trellis up FILE` would change, changing nothing",
		Long: `Show what ` + "`trellis up FILE`" + ` would change on this machine, object by object, and change nothing:
  + node|link NAME                 added
  - node|link NAME                 removed
  ~ link NAME: what changes        changed live (rate, impairments, state, MTU, connector, members);
                                   a direct link (one veth pair, no port: a point-to-point link that
                                   names no connector) given or losing ports says "re-plugged" and
                                   what its nodes see
  ! node NAME (restarts): why      restarted, alone (its kind, loopback addresses, sysctl, files or exec changed,
                                   or it is not running)
Exits 0 whether or not there are differences; the file is checked first, as up checks it. FILE
may be a containerlab topology file, as for up.
With --cluster, compares the file with the network as the cluster has it (where nodes go is the
placer's to say, and not shown).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cs, err := clusterOf(cmd); cs != nil || err != nil {
				if err != nil {
					return err
				}
				defer cs.store.Close()
				return clusterDiff(cmd, cs, args[0], asJSON)
			}
			opt, err := mo.substrate()
			if err != nil {
				return err
			}
			n, st, host, err := loadFile(store, args[0], host)
			if err != nil {
				return err
			}
			changes, err := substrate.Preview(st, n, host, opt)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if changes == nil {
					changes = []substrate.Change{}
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(changes)
			}
			if len(changes) == 0 {
				fmt.Fprintf(out, "network %s: no changes\n", n.Name)
			}
			for _, c := range changes {
				fmt.Fprintln(out, c)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&host, "host", "", "which of the file's hosts this machine is (default: the one whose address is configured here)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
