package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/pki"
)

// clusterFlags are the flags that say how to reach a cluster's etcd (docs/cluster.md).
type clusterFlags struct {
	etcd          string
	ca, cert, key string
}

func (f *clusterFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.etcd, "etcd", "", "etcd client URLs of the cluster, comma-separated (https://HOST:2379,...)")
	cmd.Flags().StringVar(&f.ca, "cacert", "", "CA certificate (PEM) that signed etcd's certificates")
	cmd.Flags().StringVar(&f.cert, "cert", "", "this client's certificate (PEM), signed by the cluster's CA")
	cmd.Flags().StringVar(&f.key, "key", "", "this client's key (PEM)")
}

// dial connects to the cluster's etcd, or says within cluster.DialTimeout why it cannot.
func (f *clusterFlags) dial(ctx context.Context) (*cluster.Store, error) {
	var eps []string
	for _, e := range strings.Split(f.etcd, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	return cluster.Dial(ctx, cluster.Config{Endpoints: eps, TLS: pki.Files{CA: f.ca, Cert: f.cert, Key: f.key}})
}
