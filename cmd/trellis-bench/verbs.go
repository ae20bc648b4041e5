package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/bench/measure"
	"github.com/trellisnet/trellis/internal/bench/report"
	"github.com/trellisnet/trellis/internal/bench/result"
	"github.com/trellisnet/trellis/internal/bench/setup"
	"github.com/trellisnet/trellis/internal/state"
)

// relayCmd is the user-space forwarder that the userspace setup runs inside its node.
func relayCmd() *cobra.Command {
	var listen, to string
	var cpu int
	cmd := &cobra.Command{
		Use:    measure.RelayCmd,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return measure.Relay(listen, to, cpu)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "UDP address to receive on")
	cmd.Flags().StringVar(&to, "to", "", "UDP address to send to")
	cmd.Flags().IntVar(&cpu, "cpu", -1, "CPU to run on")
	return cmd
}

// reportCmd remakes the plots and the Markdown page from a bench.json.
func reportCmd() *cobra.Command {
	var markdown, out string
	cmd := &cobra.Command{
		Use:   "report BENCH.json",
		Short: "Remake the plots and the Markdown page of a bench run from its JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			var rep result.Report
			if err := json.Unmarshal(data, &rep); err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			if out == "" {
				out = filepath.Dir(args[0])
			}
			if err := report.Plot(&rep, out); err != nil {
				return err
			}
			if markdown != "" {
				if err := report.WriteMarkdown(&rep, markdown, out); err != nil {
					return err
				}
			}
			report.Summary(cmd.OutOrStdout(), &rep)
			return nil
		},
	}
	cmd.Flags().StringVar(&markdown, "markdown", "", "write the Markdown page to this file")
	cmd.Flags().StringVar(&out, "out", "", "directory for the plots (default: beside the JSON)")
	return cmd
}

// cleanCmd removes what killed bench runs left behind.
func cleanCmd(stateDir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "clean",
		Short: "Remove what bench runs that were killed left behind (the next bench run does it too)",
		Long: `Remove what bench runs of this state directory left behind when they were killed (kill -9):
their simulated machines (network namespaces trbenchID-...), trellis nodes, devices and eBPF
programs, processes, work directories and records in STATE_DIR/bench/. Runs whose process still
runs are left alone, and so is everything that no bench run made. Every ` + "`trellis-bench`" + ` run does this
first by itself.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := state.Open(*stateDir)
			if err != nil {
				return err
			}
			cleaned, err := setup.Clean(st.Dir)
			for _, id := range cleaned {
				fmt.Fprintf(cmd.OutOrStdout(), "removed what bench run %s left behind\n", id)
			}
			return err
		},
	}
}
