package cli

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/logline"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/trellisnet/trellis/internal/substrate"
)

func linkCmd(store storeFunc, mo *machineOptions) *cobra.Command {
	var (
		endpoint string
		verbose  bool
		replug   bool
	)
	cmd := &cobra.Command{
		Use:   "link NETWORK [LINK up|down|set [KEY=VALUE...]]",
		Short: "List a network's links and their state, take a link's carrier away and back, or change its impairments",
		Long: `With NETWORK alone: list the network's links on this machine with their state, each endpoint's
state and impairments.

With LINK down: take the link's carrier away from every endpoint on this machine; the interfaces
inside the nodes see NO-CARRIER, as with a pulled cable, so routing daemons react at once. LINK up
gives it back. --endpoint NODE:IF does this for one endpoint of the link alone (e.g. one member of
a LAN). Nothing else changes. The state stays until the next ` + "`trellis up`" + ` of the file, which
applies the file's state: lines (up by default); ` + "`trellis diff`" + ` shows the difference.

With LINK set KEY=VALUE...: set the link's impairments live, written as in a topology file:
loss=5% (or loss="5% 25%" with a correlation), duplicate=1%, corrupt=0.1%, delay=10ms,
jitter=2ms, distribution=normal (uniform, normal, pareto, paretonormal). They replace the
link's impairments in both directions; keys not given are 0 (set with no keys removes them).
With --endpoint NODE:IF, only the frames that endpoint sends (one direction) are impaired so, and
the other directions are unchanged. They too stay until the next up of the file. Example:
  trellis link ospf-ring r1:eth1--r2:eth1 set loss=5% --endpoint r1:eth1

A direct link (a point-to-point link that names no connector, or connector: auto, while it has
nothing to enforce: one veth pair, no port; connector veth in the list above) taken down or given loss,
duplication or corruption stays one pair on Linux 6.6 and later: trellis's tcx programs on the
nodes' interfaces drop or impair its frames, and a node whose end is down sees NO-CARRIER. A
delay or jitter (or, on an older kernel, anything) re-plugs it to ports: its interfaces are made
anew. If they carry what the nodes' software made (addresses not from the file, routes, rules,
qdiscs), this is refused and nothing changes; --replug accepts the flap, and says what went.
Either way the command says which links it re-plugged. connector: shortbridge in the file keeps a
link's ports: it is never re-plugged.

With --cluster (docs/cluster.md), LINK up|down goes to the agents of the machines that hold the
link's endpoints, over mutual TLS; they act only for the tenant that owns the network.`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) >= 3 && args[2] == "set":
				_, err := parseImpairment(args[3:])
				return err
			case len(args) != 1 && len(args) != 3:
				return fmt.Errorf("give NETWORK, NETWORK LINK up|down, or NETWORK LINK set KEY=VALUE")
			case len(args) == 3 && args[2] != "up" && args[2] != "down":
				return fmt.Errorf("%q: give up, down or set KEY=VALUE", args[2])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cs, err := clusterOf(cmd); cs != nil || err != nil {
				if err != nil {
					return err
				}
				defer cs.store.Close()
				return clusterLink(cmd, cs, args, endpoint)
			}
			st, err := store()
			if err != nil {
				return err
			}
			if len(args) >= 3 {
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				progress := io.Discard
				if verbose {
					progress = cmd.ErrOrStderr()
				}
				opt, err := mo.substrate()
				if err != nil {
					return err
				}
				opt.Replug, opt.Log = replug, logline.Logger(cmd.OutOrStdout(), progress)
				if args[2] == "set" {
					im, _ := parseImpairment(args[3:]) // checked by Args
					return substrate.SetImpairment(ctx, st, args[0], args[1], endpoint, im, opt)
				}
				return substrate.SetLinkState(ctx, st, args[0], args[1], endpoint, args[2] == "up", opt)
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
	cmd.Flags().BoolVar(&replug, "replug", false, "re-plug a direct link even if its interfaces carry what the nodes' software made (it goes)")
	return cmd
}

// parseImpairment reads the KEY=VALUE words of `trellis link NET LINK set`.
func parseImpairment(words []string) (spec.Impairment, error) {
	var im spec.Impairment
	for _, w := range words {
		key, value, ok := strings.Cut(w, "=")
		if !ok {
			return im, fmt.Errorf("%q: write KEY=VALUE, e.g. loss=5%%, duplicate=1%%, corrupt=0.1%%, delay=10ms", w)
		}
		if err := im.Set(key, value); err != nil {
			return im, err
		}
	}
	return im, im.Check()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
