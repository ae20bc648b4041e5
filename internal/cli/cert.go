package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/cluster/pki"
)

// certCmd is `trellis cert ca|issue`: the certificates a cluster runs on (docs/cluster.md).
func certCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cert",
		Short: "Make a cluster's certificate authority and the certificates it signs (etcd, agents, administrator)",
		Long: `Make the certificates a trellis cluster runs on (docs/cluster.md, "Walkthrough"): everything
talks TLS with certificates of one authority. etcd takes a client's user from its certificate's
common name: root is the administrator, trellis-agent the agents and placers, a tenant's name
its tenant (trellis tenant add issues those).`,
	}
	cmd.AddCommand(certCACmd(), certIssueCmd())
	return cmd
}

func certCACmd() *cobra.Command {
	var (
		out   string
		valid time.Duration
	)
	cmd := &cobra.Command{
		Use:   "ca --out DIR",
		Short: "Make a certificate authority: DIR/ca.crt and DIR/ca.key (keep the key safe)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			crt, key := filepath.Join(out, "ca.crt"), filepath.Join(out, "ca.key")
			if _, err := os.Stat(key); err == nil {
				return fmt.Errorf("%s exists: a new CA would not trust the certificates of the old one; remove it first if that is what you want", key)
			}
			ca, err := pki.NewCA("trellis cluster CA", valid)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(crt, ca.PEM, 0o644); err != nil {
				return err
			}
			if err := ca.WriteKey(key); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "certificate authority: %s, key %s\n", crt, key)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", ".", "directory to write ca.crt and ca.key into")
	cmd.Flags().DurationVar(&valid, "valid", 10*365*24*time.Hour, "how long the CA is valid")
	return cmd
}

func certIssueCmd() *cobra.Command {
	var (
		caCrt, caKey, out, hosts string
		valid                    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "issue NAME --ca CA.crt --ca-key CA.key [--hosts H1,H2] [--out DIR]",
		Short: "Issue a certificate of common name NAME: DIR/NAME.crt and DIR/NAME.key",
		Long: `Issue a certificate of common name NAME, signed by the CA, into DIR/NAME.crt and DIR/NAME.key.
It is a client certificate; with --hosts (names or IP addresses) it is also a server certificate
for those hosts: etcd members (their addresses) and agents (the machine's underlay address, for
exec and link). Names: root for the administrator, trellis-agent for agents and placers.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if caCrt == "" || caKey == "" {
				return errors.New("--ca and --ca-key: give the CA's certificate and key (trellis cert ca makes them)")
			}
			ca, err := pki.LoadCA(caCrt, caKey)
			if err != nil {
				return err
			}
			usage := pki.Client
			var hs []string
			for _, h := range strings.Split(hosts, ",") {
				if h = strings.TrimSpace(h); h != "" {
					hs = append(hs, h)
				}
			}
			if len(hs) > 0 {
				usage |= pki.Server
			}
			p, err := ca.Issue(args[0], usage, hs, valid)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			crt, key, err := p.Write(out, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "certificate %s (key %s) for %s", crt, key, args[0])
			if len(hs) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), ", also a server for %s", strings.Join(hs, ", "))
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return nil
		},
	}
	cmd.Flags().StringVar(&caCrt, "ca", "", "the CA's certificate (PEM)")
	cmd.Flags().StringVar(&caKey, "ca-key", "", "the CA's key (PEM)")
	cmd.Flags().StringVar(&out, "out", ".", "directory to write NAME.crt and NAME.key into")
	cmd.Flags().StringVar(&hosts, "hosts", "", "names or IP addresses a server certificate is for, comma-separated (none: a client certificate only)")
	cmd.Flags().DurationVar(&valid, "valid", 365*24*time.Hour, "how long the certificate is valid")
	return cmd
}
