package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/pki"
)

// machineCmd is `trellis machine add|rm`: the identities of a cluster's agents, for the
// administrator.
func machineCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "machine",
		Short: "Manage the identities of a cluster's agents: one etcd user and certificate per machine (administrator)",
		Long: `Manage the agents' identities (docs/cluster.md, "Certificates"), with the administrator's context
file (--cluster). Each machine's agent has its own certificate (common name agent:MACHINE) and
etcd user, whose role writes only that machine's registration and its reports of the tenants'
networks: an agent cannot register, renew or report for another machine, nor write placements
(unless --placer gives it the placers' role, for trellis agent --placer).`,
	}
	cmd.AddCommand(machineAddCmd(), machineLsCmd(), machineRmCmd())
	return cmd
}

func machineAddCmd() *cobra.Command {
	var (
		caKey, outDir, hosts string
		valid                time.Duration
		placer               bool
	)
	cmd := &cobra.Command{
		Use:   "add NAME --ca-key CA.key --hosts ADDRESS [--placer] [--out DIR]",
		Short: "Add a machine's agent: its etcd user and role, and its certificate DIR/agent-NAME.crt and .key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			var hs []string
			for _, h := range strings.Split(hosts, ",") {
				if h = strings.TrimSpace(h); h != "" {
					hs = append(hs, h)
				}
			}
			if len(hs) == 0 {
				return errors.New("--hosts: give the machine's underlay address: the agent's endpoint (exec, link) is served there")
			}
			cs, cc, err := adminSession(cmd)
			if err != nil {
				return err
			}
			defer cs.store.Close()
			if caKey == "" {
				return errors.New("--ca-key: give the key of the CA that signed etcd's certificates (" + cc.CACert + "), to issue the agent's")
			}
			ca, err := pki.LoadCA(cc.CACert, caKey)
			if err != nil {
				return err
			}
			pair, err := ca.Issue(cluster.AgentUser(name), pki.Client|pki.Server, hs, valid) // first: a bad CA leaves nothing made
			if err != nil {
				return err
			}
			if err := cs.store.AddAgent(cmd.Context(), name, placer); err != nil {
				return err
			}
			if err := os.MkdirAll(outDir, 0o755); err != nil {
				return err
			}
			crt, key, err := pair.Write(outDir, "agent-"+name)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(outDir, "ca.crt"), ca.PEM, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "machine %s added: its agent's certificate %s (key %s), for %s; run trellis agent --machine %s with it\n",
				name, crt, key, strings.Join(hs, ", "), name)
			return nil
		},
	}
	cmd.Flags().StringVar(&caKey, "ca-key", "", "key (PEM) of the CA of the context file's cacert, to sign the agent's certificate")
	cmd.Flags().StringVar(&outDir, "out", ".", "directory for agent-NAME.crt, agent-NAME.key and ca.crt")
	cmd.Flags().StringVar(&hosts, "hosts", "", "the machine's underlay address(es), comma-separated: the agent's endpoint is a server for them")
	cmd.Flags().BoolVar(&placer, "placer", false, "also give the agent the placers' role (for trellis agent --placer)")
	cmd.Flags().DurationVar(&valid, "valid", 365*24*time.Hour, "how long the agent's certificate is valid")
	return cmd
}

func machineRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a machine's agent's etcd user and role: its certificate is refused, and its registration goes with its lease",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, _, err := adminSession(cmd)
			if err != nil {
				return err
			}
			defer cs.store.Close()
			if err := cs.store.RemoveAgent(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "machine %s removed\n", args[0])
			return nil
		},
	}
}

func machineLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the registered machines: those whose agent holds its lease now, with what each offers to placement",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, _, err := adminSession(cmd)
			if err != nil {
				return err
			}
			defer cs.store.Close()
			ms, _, err := cs.store.Machines(cmd.Context())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "MACHINE\tADDRESS\tCORES\tMEMORY\tENDPOINT\tSINCE")
			for _, m := range ms {
				fmt.Fprintf(w, "%s\t%s\t%g\t%dM\t%s\t%s\n", m.Name, m.Address, m.Cores, m.Memory>>20, m.Endpoint, m.Since.Format(time.RFC3339))
			}
			return w.Flush()
		},
	}
}
