package cli

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/substrate"
)

func linkCmd(store storeFunc) *cobra.Command {
	var (
		endpoint string
		verbose  bool
	)
	cmd := &cobra.Command{
		Use:   "link NETWORK [LINK up|down]",
		Short: "List a network's links and their state, or take a link's carrier away and back",
		Long: `With NETWORK alone: list the network's links on this machine with their state, each endpoint's
state and impairments.

With LINK down: take the link's carrier away from every endpoint on this machine; the interfaces
inside the nodes see NO-CARRIER, as with a pulled cable, so routing daemons react at once. LINK up
gives it back. --endpoint NODE:IF does this for one endpoint of the link alone (e.g. one member of
a LAN). Nothing else changes. The state stays until the next ` + "`trellis up`" + ` of the file, which
applies the file's state: lines (up by default); ` + "`trellis diff`" + ` shows the difference.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 && len(args) != 3 {
				return fmt.Errorf("give NETWORK, or NETWORK LINK up|down")
			}
			if len(args) == 3 && args[2] != "up" && args[2] != "down" {
				return fmt.Errorf("the state is %q: give up or down", args[2])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := store()
			if err != nil {
				return err
			}
			if len(args) == 3 {
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				progress := io.Discard
				if verbose {
					progress = cmd.ErrOrStderr()
				}
				return substrate.SetLinkState(ctx, st, args[0], args[1], endpoint, args[2] == "up", progress)
			}
			info, err := substrate.Inspect(st, args[0])
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "LINK\tCONNECTOR\tSTATE\tRATE\tENDPOINT\tENDPOINT STATE\tIMPAIRMENT\n")
			for _, l := range info.Links {
				for _, e := range l.Endpoints {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s:%s\t%s\t%s\n", l.Name, l.Connector, l.State, dash(l.Rate), e.Node, e.Interface, e.State, dash(e.Impairment))
				}
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "only this endpoint of the link, NODE:IF")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print how long each step took")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
