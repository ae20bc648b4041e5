package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/noderuntime"
	"github.com/trellisnet/trellis/internal/substrate"
)

// httpError is a refusal with its HTTP status.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func refuse(code int, format string, args ...any) error {
	return &httpError{code: code, msg: fmt.Sprintf(format, args...)}
}

// serve answers exec and link on l (already wrapped in TLS that requires a client certificate)
// until ctx ends.
func (a *Agent) serve(ctx context.Context, l net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+ExecPath, func(w http.ResponseWriter, r *http.Request) {
		var req ExecRequest
		answer(w, a.decode(r, &req, func() (any, error) { return a.exec(r, &req) }))
	})
	mux.HandleFunc("POST "+LinkPath, func(w http.ResponseWriter, r *http.Request) {
		var req LinkRequest
		answer(w, a.decode(r, &req, func() (any, error) { return struct{}{}, a.link(r, &req) }))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.log.Error("endpoint stopped", "err", err)
	}
}

// result is a handler's answer, or its error.
type result struct {
	v   any
	err error
}

func (a *Agent) decode(r *http.Request, into any, do func() (any, error)) result {
	if err := json.NewDecoder(io.LimitReader(r.Body, 2*noderuntime.MaxOutput)).Decode(into); err != nil {
		return result{err: refuse(http.StatusBadRequest, "bad request: %v", err)}
	}
	v, err := do()
	return result{v, err}
}

func answer(w http.ResponseWriter, res result) {
	w.Header().Set("Content-Type", "application/json")
	if res.err != nil {
		code := http.StatusInternalServerError
		var he *httpError
		if errors.As(res.err, &he) {
			code = he.code
		}
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(apiError{Error: res.err.Error()})
		return
	}
	json.NewEncoder(w).Encode(res.v)
}

// authorize finds whose network a request is about, from the client's certificate, and checks
// in etcd that the certificate is the one the cluster holds for its tenant (a removed tenant's,
// or one of before the tenant was added again, is refused) and that the tenant owns a network of
// that name. It returns the tenant and the network's placement. A tenant's certificate reaches
// only its own networks; the administrator's (root) reaches any tenant's it names; no other
// identity runs anything.
func (a *Agent) authorize(r *http.Request, tenant, network string) (string, *cluster.Placement, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return "", nil, refuse(http.StatusUnauthorized, "no client certificate")
	}
	cert := r.TLS.PeerCertificates[0]
	// Bounded as the CLI's own reads are: without etcd's quorum the request fails, it does not hang.
	ctx, cancel := context.WithTimeout(r.Context(), cluster.DialTimeout)
	defer cancel()
	id := cluster.ParseIdentity(cert.Subject.CommonName)
	switch {
	case id.Kind == cluster.KindAdmin:
		if tenant == "" {
			tenant = cluster.DefaultTenant
		}
	case id.Kind != cluster.KindTenant:
		return "", nil, refuse(http.StatusForbidden, "the certificate of %s runs nothing in nodes; use a tenant's", cert.Subject.CommonName)
	case tenant != "" && tenant != id.Name:
		return "", nil, refuse(http.StatusForbidden, "the certificate of tenant %s reaches only its own networks, not tenant %s's", id.Name, tenant)
	default:
		tenant = id.Name
		if err := a.cfg.Store.CheckTenantCert(ctx, tenant, cert); err != nil {
			if errors.Is(err, cluster.ErrRevoked) {
				return "", nil, refuse(http.StatusForbidden, "%v", err)
			}
			return "", nil, err
		}
	}
	if _, err := a.cfg.Store.Network(ctx, tenant, network); err != nil {
		if errors.Is(err, cluster.ErrNotFound) || errors.Is(err, cluster.ErrBadName) {
			return "", nil, refuse(http.StatusNotFound, "tenant %s has no network %s", tenant, network)
		}
		return "", nil, err
	}
	p, err := a.cfg.Store.Placement(ctx, tenant, network)
	if errors.Is(err, cluster.ErrNotFound) || (err == nil && !p.OnMachine(a.cfg.Machine.Name)) {
		return "", nil, refuse(http.StatusNotFound, "network %s of tenant %s has no nodes on machine %s", network, tenant, a.cfg.Machine.Name)
	}
	return tenant, p, err
}

// exec runs a request's command in a node of the machine, for the network's tenant.
func (a *Agent) exec(r *http.Request, req *ExecRequest) (*ExecResult, error) {
	tenant, p, err := a.authorize(r, req.Tenant, req.Network)
	if err != nil {
		return nil, err
	}
	me := a.cfg.Machine.Name
	if m, ok := p.Nodes[req.Node]; !ok || m != me {
		return nil, refuse(http.StatusNotFound, "network %s has no node %s on machine %s", req.Network, req.Node, me)
	}
	if len(req.Argv) == 0 {
		return nil, refuse(http.StatusBadRequest, "no command: give one after --")
	}
	local := LocalName(tenant, req.Network)
	rec, err := a.cfg.State.Load(local)
	if err != nil || rec == nil {
		return nil, refuse(http.StatusServiceUnavailable, "network %s is not (yet) on machine %s: %v", req.Network, me, err)
	}
	running, err := noderuntime.Find(a.cfg.State.ID, rec.NetID)
	if err != nil {
		return nil, err
	}
	pid, ok := running[req.Node]
	if !ok {
		return nil, refuse(http.StatusServiceUnavailable, "node %s of network %s does not run on machine %s", req.Node, req.Network, me)
	}
	timeout := DefaultExecTimeout
	if req.Timeout > 0 {
		timeout = time.Duration(req.Timeout * float64(time.Second))
	}
	a.log.Info("exec", "tenant", tenant, "network", req.Network, "node", req.Node, "argv", req.Argv)
	res, err := noderuntime.Run(r.Context(), pid, req.Argv, req.Stdin, timeout)
	if err != nil {
		return nil, err
	}
	return &ExecResult{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr, TimedOut: res.TimedOut,
		Truncated: res.Truncated, Seconds: res.Seconds, Machine: me}, nil
}

// link changes a link's state on the machine, for the network's tenant.
func (a *Agent) link(r *http.Request, req *LinkRequest) error {
	tenant, _, err := a.authorize(r, req.Tenant, req.Network)
	if err != nil {
		return err
	}
	a.log.Info("link", "tenant", tenant, "network", req.Network, "link", req.Link, "up", req.Up)
	opt := a.cfg.Substrate
	opt.Log = a.log.With("network", LocalName(tenant, req.Network))
	err = substrate.SetLinkState(r.Context(), a.cfg.State, LocalName(tenant, req.Network), req.Link, req.Endpoint, req.Up, opt)
	if err != nil {
		return refuse(http.StatusBadRequest, "network %s on machine %s: %v", req.Network, a.cfg.Machine.Name, err)
	}
	return nil
}
