package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/substrate"
)

func upCmd(store storeFunc) *cobra.Command {
	var (
		verbose bool
		host    string
	)
	cmd := &cobra.Command{
		Use:   "up FILE",
		Short: "Create the virtual network declared in FILE, or bring it up to date",
		Long: `Create the virtual network declared in the topology file FILE.

If the network is already up, nothing changes unless a link's rate changed in the file: the new
rate is applied in place, without touching anything else. Other changes need ` + "`trellis down`" + ` first.
The file is checked before anything is created; if creating fails half-way, what was created is
removed again.

A file with a hosts: section spreads the network over several machines: run up with the same
file on each of them. This machine is the host whose underlay address is configured here, or
the one --host names; it gets its nodes and its ends of the links that cross to other machines.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := spec.Load(args[0])
			if err != nil {
				return err
			}
			st, err := store()
			if err != nil {
				return err
			}
			file, _ := filepath.Abs(args[0])
			progress := io.Discard
			if verbose {
				progress = cmd.ErrOrStderr()
			}
			if len(n.Hosts) > 0 && host == "" {
				if host, err = substrate.LocalHost(n); err != nil {
					return err
				}
			}
			p, err := plan.Make(n, st.ID, host)
			if err != nil {
				return err
			}
			res, err := substrate.Up(st, p, file, progress)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case res.Created:
				fmt.Fprintf(out, "network %s is up%s: %d nodes, %d links (%.2fs)\n", n.Name, onHost(host), len(p.Nodes), len(p.Links), res.Took.Seconds())
			case len(res.RatesChanged) > 0:
				fmt.Fprintf(out, "network %s: rate changed on %s\n", n.Name, strings.Join(res.RatesChanged, ", "))
			default:
				fmt.Fprintf(out, "network %s is up to date: nothing changed\n", n.Name)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print how long each step of creating took")
	cmd.Flags().StringVar(&host, "host", "", "which of the file's hosts this machine is (default: the one whose address is configured here)")
	return cmd
}

func onHost(host string) string {
	if host == "" {
		return ""
	}
	return " on host " + host
}
