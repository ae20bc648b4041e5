package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/capture"
	"golang.org/x/net/bpf"
	"golang.org/x/term"
)

func captureCmd(store storeFunc) *cobra.Command {
	var (
		endpoint, file string
		count          int
	)
	cmd := &cobra.Command{
		Use:   "capture NETWORK LINK [FILTER...]",
		Short: "Record a link's frames, both directions, as pcapng (from outside the nodes)",
		Long: `Record the frames of link LINK of NETWORK as pcapng, read from the link's ports on this
machine (nothing runs inside the nodes), to standard output or --write FILE, until Ctrl-C or
--count frames:

  trellis capture ospf-ring r1:eth1--r2:eth1 | tcpdump -n -r -
  trellis capture ospf-ring r1:eth1--r2:eth1 -w ring.pcapng -c 100 ospf

Every frame is recorded once, on an interface named after the node interface that sent it
(NODE:IF). With --endpoint NODE:IF, the frames that endpoint sends and receives, on one
interface named after it, each with its direction. FILTER is a pcap filter expression as
tcpdump takes it (compiled by tcpdump -ddd: filters need tcpdump installed), never tcpdump's
options; one that begins with "-" goes after "--" (trellis capture NET LINK -- '-4 < len').`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var filter []bpf.RawInstruction
			if expr := strings.Join(args[2:], " "); expr != "" {
				var err error
				if filter, err = capture.CompileFilter(expr, capture.Snaplen); err != nil {
					return err
				}
			}
			st, err := store()
			if err != nil {
				return err
			}
			plan, err := capture.ForLink(st, args[0], args[1], endpoint)
			if err != nil {
				return err
			}
			out, done, err := captureOutput(cmd, file)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(cmd.ErrOrStderr(), "capturing link %s of network %s (%s)\n", args[1], args[0], strings.Join(plan.Interfaces, ", "))
			n, err := capture.Run(ctx, plan, out, capture.Options{Filter: filter, Count: count})
			if derr := done(); err == nil {
				err = derr
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d frames\n", n)
			return err
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "only the frames this endpoint of the link sends and receives, NODE:IF")
	cmd.Flags().StringVarP(&file, "write", "w", "", "write to FILE instead of standard output")
	cmd.Flags().IntVarP(&count, "count", "c", 0, "stop after this many frames")
	return cmd
}

// captureOutput opens where the capture goes; done flushes and closes it. Binary data is not
// written to a terminal.
func captureOutput(cmd *cobra.Command, file string) (io.Writer, func() error, error) {
	if file == "" || file == "-" {
		out := cmd.OutOrStdout()
		if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return nil, nil, fmt.Errorf("capture: standard output is a terminal: pipe it (| tcpdump -n -r -) or give -w FILE")
		}
		return out, func() error { return nil }, nil
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600) // a network's traffic: for its user alone
	if err != nil {
		return nil, nil, fmt.Errorf("capture: %w", err)
	}
	w := bufio.NewWriter(f)
	return w, func() error {
		if err := w.Flush(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}, nil
}
