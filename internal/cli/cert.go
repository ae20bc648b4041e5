package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/pki"
)

// certCmd is `trellis cert ca|issue`: the certificates a cluster runs on (docs/cluster.md).
func certCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cert",
		Short: "Make a cluster's certificate authorities and the certificates they sign (etcd, administrator, placers)",
		Long: `Make the certificates a trellis cluster runs on (docs/cluster.md, "Certificates"). Two
authorities: the cluster's (ca.crt), which signs every client and the servers they talk to, and
the peers' (peer-ca.crt, cert ca --peer), which signs only the etcd members' peer certificates,
so that etcd's peer port lets in its members and nobody else. Each certificate is for one use:
a client (an identity: etcd takes its user from the common name: root is the administrator,
placer the placers), a server (--hosts: an etcd member's client port, the API), or an etcd
member's peer (--peer). Agents' and tenants' certificates are issued with their etcd users by
trellis machine add and trellis tenant add.`,
	}
	cmd.AddCommand(certCACmd(), certIssueCmd())
	return cmd
}

func certCACmd() *cobra.Command {
	var (
		out   string
		valid time.Duration
		peer  bool
	)
	cmd := &cobra.Command{
		Use:   "ca --out DIR [--peer]",
		Short: "Make a certificate authority: DIR/ca.crt and DIR/ca.key, or with --peer the etcd peers' own, DIR/peer-ca.crt and .key (keep the keys safe)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			base, name := "ca", "trellis cluster CA"
			if peer {
				base, name = "peer-ca", "trellis etcd peers CA"
			}
			crt, key := filepath.Join(out, base+".crt"), filepath.Join(out, base+".key")
			if _, err := os.Stat(key); err == nil {
				return fmt.Errorf("%s exists: a new CA would not trust the certificates of the old one; remove it first if that is what you want", key)
			}
			ca, err := pki.NewCA(name, valid)
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
	cmd.Flags().BoolVar(&peer, "peer", false, "make the etcd peers' CA (peer-ca.crt, peer-ca.key), which signs only etcd members' peer certificates")
	return cmd
}

func certIssueCmd() *cobra.Command {
	var (
		caCrt, caKey, out, hosts string
		valid                    time.Duration
		peer                     bool
	)
	cmd := &cobra.Command{
		Use:   "issue NAME --ca CA.crt --ca-key CA.key [--hosts H1,H2 [--peer]] [--out DIR]",
		Short: "Issue a certificate of common name NAME: DIR/NAME.crt and DIR/NAME.key (DIR/NAME-peer.* with --peer)",
		Long: `Issue a certificate of common name NAME, signed by the CA, into DIR/NAME.crt and DIR/NAME.key.
Without --hosts it is a client certificate (an identity: root for the administrator, placer for
placers). With --hosts (names or IP addresses) it is a server certificate for those hosts and no
client: an etcd member's client port, the API. With --peer (and --hosts, and the peers' CA:
cert ca --peer) it is an etcd member's peer certificate, DIR/NAME-peer.crt and .key, server and
client of the other members. Common names tenant:... and agent:... are issued only by
trellis tenant add and trellis machine add, with their etcd users.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if caCrt == "" || caKey == "" {
				return errors.New("--ca and --ca-key: give the CA's certificate and key (trellis cert ca makes them)")
			}
			if by, ok := cluster.ReservedPrefix(name); ok {
				return fmt.Errorf("NAME %q: this kind of certificate is issued by %s, with its etcd user; not by cert issue", name, by)
			}
			var hs []string
			for _, h := range strings.Split(hosts, ",") {
				if h = strings.TrimSpace(h); h != "" {
					hs = append(hs, h)
				}
			}
			usage, file, what := pki.Client, name, "a client"
			switch {
			case peer && len(hs) == 0:
				return errors.New("--peer needs --hosts: the member's addresses, which the other members check")
			case peer:
				usage, file, what = pki.Peer, name+"-peer", "an etcd peer for "+strings.Join(hs, ", ")
			case len(hs) > 0:
				usage, what = pki.Server, "a server for "+strings.Join(hs, ", ")
			}
			ca, err := pki.LoadCA(caCrt, caKey)
			if err != nil {
				return err
			}
			p, err := ca.Issue(name, usage, hs, valid)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			crt, key, err := p.Write(out, file)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "certificate %s (key %s) for %s: %s\n", crt, key, name, what)
			return nil
		},
	}
	cmd.Flags().StringVar(&caCrt, "ca", "", "the CA's certificate (PEM)")
	cmd.Flags().StringVar(&caKey, "ca-key", "", "the CA's key (PEM)")
	cmd.Flags().StringVar(&out, "out", ".", "directory to write NAME.crt and NAME.key into")
	cmd.Flags().StringVar(&hosts, "hosts", "", "names or IP addresses a server (or --peer) certificate is for, comma-separated (none: a client certificate)")
	cmd.Flags().BoolVar(&peer, "peer", false, "an etcd member's peer certificate (with the peers' CA, cert ca --peer)")
	cmd.Flags().DurationVar(&valid, "valid", 365*24*time.Hour, "how long the certificate is valid")
	return cmd
}
