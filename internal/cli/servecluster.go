package cli

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/agent"
	"github.com/trellisnet/trellis/internal/api"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/web"
)

// ErrServeClusterAdmin: serve --cluster was given a context file whose certificate is not the
// administrator's.
var ErrServeClusterAdmin = errors.New("serve --cluster takes the administrator's context file (a certificate of root): the API keeps the tenants apart itself")

// serveCluster serves the API of the cluster of context file path on listen, with TLS and a
// client certificate asked of every client (docs/api.md, "Serving a cluster").
func serveCluster(ctx context.Context, cmd *cobra.Command, path, listen string, hosts []string, t api.TLS, opts api.Options) error {
	if listen == "" || t.Cert == "" || t.Key == "" {
		return fmt.Errorf("serve --cluster: give --listen HOST:PORT with --tls-cert and --tls-key: a cluster's API is served only with TLS and client certificates (there is no unix socket)")
	}
	cc, err := cluster.LoadContext(path)
	if err != nil {
		return err
	}
	if cn, err := commonName(cc.Cert); err != nil {
		return fmt.Errorf("serve --cluster: %s: cert %s: %w", path, cc.Cert, err)
	} else if cn != cluster.RootUser {
		return fmt.Errorf("%w; %s names %s", ErrServeClusterAdmin, cc.Cert, cn)
	}
	if t.ClientCA == "" {
		t.ClientCA = cc.CACert
	}
	l, err := api.Listen(listen, t)
	if err != nil {
		return err
	}
	if opts.Access.Hosts, err = api.Hosts(listen, t, hosts); err != nil {
		l.Close()
		return err
	}
	st, err := cluster.Dial(ctx, cc.Config())
	if err != nil {
		l.Close()
		return err
	}
	defer st.Close()
	tc, err := cc.Config().TLS.ClientConfig()
	if err != nil {
		l.Close()
		return err
	}
	opts.Cluster = &api.Cluster{Store: st, Agents: agent.NewClient(tc)}
	s := api.New(ctx, nil, opts)
	s.Handle("GET /", web.Handler())
	return serve(ctx, s, []net.Listener{l}, true, cmd)
}

// commonName reads the common name of the first certificate of PEM file path.
func commonName(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return "", errors.New("no PEM certificate in it")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return "", err
	}
	return c.Subject.CommonName, nil
}
