package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/trellisnet/trellis/internal/api"
	"github.com/trellisnet/trellis/internal/metrics"
	"github.com/trellisnet/trellis/internal/state"
	"github.com/trellisnet/trellis/internal/web"
)

func serveCmd(store storeFunc, mo *machineOptions) *cobra.Command {
	var socket, listen, tokenFile string
	var hosts []string
	var tlsFiles api.TLS
	var quiet bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the web page, the HTTP API and Prometheus metrics on a unix socket, and optionally on TCP",
		Long: `Serve the HTTP API of this state directory: list, inspect, up (POST a topology file), diff,
down, link state and impairments, exec (non-interactive), a terminal into a node (websocket) and capture of a link, as the CLI offers
them, described by the OpenAPI 3 document at /openapi.json; Prometheus metrics at /metrics;
and at / a web page: the networks, a live graph of one with each link's rates and drops,
link state, terminals and captures (open http://127.0.0.1:8080/ with --listen 127.0.0.1:8080).
See docs/api.md.

The API listens on the unix socket --socket (default STATE_DIR/trellis.sock, mode 0600: root
only), e.g. ` + "`curl --unix-socket /var/lib/trellis/trellis.sock http://x/networks`" + `. --listen
HOST:PORT adds a TCP listener. Whoever reaches the API can run commands as root in nodes (a
file's exec: lines), so every TCP client is authenticated, loopback included. On a loopback
address, by the token in --token-file (default STATE_DIR/api-token, mode 0600, made with a
random token by the first serve and kept): clients send Authorization: Bearer TOKEN (curl -H
"Authorization: Bearer $(cat /var/lib/trellis/api-token)"; Prometheus: credentials_file), and
serve prints the web page's address with the token (http://127.0.0.1:8080/?token=...), which the
page trades for a cookie. An address other than loopback is served only with TLS and client
certificates: --tls-cert and --tls-key (PEM) are the server's, and every client must present a
certificate signed by the CA of --client-ca (curl --cacert CA --cert CERT --key KEY). The three
flags work on a loopback address too (the certificate then replaces the token).

A TCP request must name the server by one of its names in its Host header (the --listen
address; localhost, 127.0.0.1 and ::1 for a loopback one; the TLS certificate's names; each
--host NAME), and a browser's request must come from the page the server serves: a page
elsewhere cannot call the API (DNS rebinding, cross-site forms and websockets are refused). A
topology file sent over TCP names no path on this machine (files: source:, rootfs, a VM's
kernel, initrd, disk): send the files' content: instead; root on the unix socket may.

With --cluster CONTEXT (the administrator's context file, certificate of root) it serves the
cluster's networks instead, each tenant its own: only on --listen, with --tls-cert and --tls-key
(a server certificate of the cluster's CA: trellis cert issue NAME --hosts HOST), and every
client presents a certificate of the cluster's CA (--client-ca, default the context's cacert):
a tenant's, the one trellis tenant add issued it (a removed tenant's is refused), or root's, the administrator's, who
sees every tenant's networks and names one in the Trellis-Tenant header. Another tenant's
network is not found (404), naming another tenant is refused (403); quotas apply to up. exec
and link go through the agents; impairments, terminals, capture and /metrics are not served
for a cluster. See docs/api.md, "Serving a cluster".

Ctrl-C (or SIGTERM) stops the server; a change under way stops cleanly, as Ctrl-C stops up.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			sub, err := mo.substrate()
			if err != nil {
				return err
			}
			opts := api.Options{Substrate: sub}
			if !quiet {
				opts.Log = cmd.ErrOrStderr()
			}
			if path, _ := cmd.Flags().GetString(clusterFlag); path != "" {
				return serveCluster(ctx, cmd, path, listen, hosts, tlsFiles, opts)
			}
			st, err := store()
			if err != nil {
				return err
			}
			if socket == "" {
				socket = filepath.Join(st.Dir, "trellis.sock")
			}
			if listen == "" && !tlsFiles.IsZero() {
				return fmt.Errorf("serve: --tls-cert, --tls-key and --client-ca are for --listen, which is not given")
			}
			if listen == "" && (tokenFile != "" || len(hosts) > 0) {
				return fmt.Errorf("serve: --token-file and --host are for --listen, which is not given")
			}
			var ls []net.Listener
			if listen != "" { // checked first: a refused address leaves no socket behind
				if tokenFile == "" {
					tokenFile = filepath.Join(st.Dir, "api-token")
				}
				l, err := listenTCP(cmd, listen, tokenFile, hosts, tlsFiles, &opts.Access)
				if err != nil {
					return err
				}
				ls = append(ls, l)
			}
			l, err := api.ListenUnix(socket)
			if err != nil {
				closeAll(ls)
				return err
			}
			ls = append(ls, l)
			return serve(ctx, newHandler(ctx, st, opts), ls, !tlsFiles.IsZero(), cmd)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "unix socket to listen on (default STATE_DIR/trellis.sock)")
	cmd.Flags().StringVar(&listen, "listen", "", "also listen on this TCP address, HOST:PORT (e.g. 127.0.0.1:8080); other than loopback only with TLS")
	cmd.Flags().StringVar(&tlsFiles.Cert, "tls-cert", "", "serve --listen with TLS: the server's certificate (PEM)")
	cmd.Flags().StringVar(&tlsFiles.Key, "tls-key", "", "the key of --tls-cert (PEM)")
	cmd.Flags().StringVar(&tlsFiles.ClientCA, "client-ca", "", "CA certificate (PEM) whose certificates clients of --listen must present (with --cluster: default the context's cacert)")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "the token of --listen's clients without TLS: made (mode 0600) if it does not exist (default STATE_DIR/api-token)")
	cmd.Flags().StringArrayVar(&hosts, "host", nil, "a name the server is reached by on --listen, besides its address (repeat for more)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "do not log requests")
	return cmd
}

// listenTCP listens on addr and sets who may use it: the names it is reached by, and without
// TLS the token of tokenFile, whose web page address it prints.
func listenTCP(cmd *cobra.Command, addr, tokenFile string, hosts []string, t api.TLS, acc *api.Access) (net.Listener, error) {
	l, err := api.Listen(addr, t)
	if err != nil {
		return nil, err
	}
	names, err := api.Hosts(addr, t, hosts)
	if err != nil {
		l.Close()
		return nil, err
	}
	if t.IsZero() {
		if acc.Token, err = api.LoadToken(tokenFile); err != nil {
			l.Close()
			return nil, fmt.Errorf("serve: %w", err)
		}
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	acc.Hosts, acc.Cookie = names, "trellis-token-"+port
	if acc.Token != nil {
		host, _, _ := net.SplitHostPort(addr)
		fmt.Fprintf(cmd.OutOrStdout(), "web page: http://%s/?%s=%s (the token is in %s)\n", net.JoinHostPort(host, port), api.TokenParam, acc.Token, tokenFile)
	}
	return l, nil
}

// serve serves h on every listener until ctx is cancelled; withTLS says the TCP one serves
// TLS.
func serve(ctx context.Context, h http.Handler, ls []net.Listener, withTLS bool, cmd *cobra.Command) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ConnContext: api.ConnContext}
	errc := make(chan error, len(ls))
	for _, l := range ls {
		how := ""
		if withTLS && l.Addr().Network() == "tcp" {
			how = " (TLS, client certificates)"
		}
		fmt.Fprintf(cmd.OutOrStdout(), "serving on %s %s%s\n", l.Addr().Network(), l.Addr(), how)
		go func() { errc <- srv.Serve(l) }()
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		closeAll(ls)
		return err
	}
	shut, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newHandler is the API with the Prometheus metrics at /metrics.
func newHandler(ctx context.Context, st *state.Store, opts api.Options) http.Handler {
	m := metrics.New(st)
	opts.Observe = m.ObserveUp
	s := api.New(ctx, st, opts)
	s.Handle("GET /metrics", m.Handler())
	s.Handle("GET /", web.Handler())
	return s
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		l.Close()
	}
}
