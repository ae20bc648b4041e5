package cli

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/placer"
)

func placerCmd() *cobra.Command {
	var cf clusterFlags
	cmd := &cobra.Command{
		Use:   "placer --etcd URLS --cacert CA --cert CERT --key KEY",
		Short: "Place the cluster's networks onto its machines (one leader among all placers)",
		Long: `Place the networks of a trellis cluster onto its registered machines (docs/cluster.md). Any
number of placers may run; one is leader, elected through etcd, and only it writes placements.
It places every new or changed network (nodes with host: stay there, placed nodes stay where they
are, the others go by capacity when the file gives cpu or memory, else to the machine with the
fewest nodes), refuses a network that does not fit with the machine and resource that are short,
and places the nodes of a machine whose registration expired again on the others.
` + "`trellis agent --placer`" + ` runs a placer inside the agent instead. --cert is the placers'
certificate (trellis cert issue placer), whose etcd role writes placements and nothing else.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			s, err := cf.dial(ctx)
			if err != nil {
				return err
			}
			defer s.Close()
			host, _ := os.Hostname()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			return placer.Run(ctx, placer.Config{Store: s, ID: fmt.Sprintf("%s/%d", host, os.Getpid()), Log: log})
		},
	}
	cf.add(cmd)
	return cmd
}
