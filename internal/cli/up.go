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
	var verbose bool
	cmd := &cobra.Command{
		Use:   "up FILE",
		Short: "Create the virtual network declared in FILE, or bring it up to date",
		Long: `Create the virtual network declared in the topology file FILE.

If the network is already up, nothing changes unless a link's rate changed in the file: the new
rate is applied in place, without touching anything else. Other changes need ` + "`trellis down`" + ` first.
The file is checked before anything is created; if creating fails half-way, what was created is
removed again.`,
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
			res, err := substrate.Up(st, plan.Make(n, st.ID), file, progress)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case res.Created:
				fmt.Fprintf(out, "network %s is up: %d nodes, %d links (%.2fs)\n", n.Name, len(n.Nodes), len(n.Links), res.Took.Seconds())
			case len(res.RatesChanged) > 0:
				fmt.Fprintf(out, "network %s: rate changed on %s\n", n.Name, strings.Join(res.RatesChanged, ", "))
			default:
				fmt.Fprintf(out, "network %s is up to date: nothing changed\n", n.Name)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print how long each step of creating took")
	return cmd
}
