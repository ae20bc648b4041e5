package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/trellisnet/trellis/internal/agent"
	"github.com/trellisnet/trellis/internal/cluster"
)

// Serving a cluster (docs/api.md, "Serving a cluster"): the API's networks are the tenants'
// networks in etcd, and every request is made by the tenant its client certificate names (its
// common name, as etcd and the agents take it). A tenant reaches only its own networks: they
// are looked up under its name alone, so another tenant's network is not found (404, the same
// answer as for a network that does not exist: nothing tells it exists), and naming another
// tenant in the Trellis-Tenant header is refused (403). The administrator's certificate (root)
// reaches every tenant's: list shows them all, and the header says which tenant a request is
// about (default: tenant default). Agents', placers' and removed tenants' certificates are
// refused (403), and a client without a client certificate of the cluster's CA gets no
// connection at all (TLS refuses it).

// TenantHeader names, in a request of the administrator, the tenant whose network it is about.
const TenantHeader = "Trellis-Tenant"

// Cluster is what the API needs to serve a cluster's networks instead of a state directory's.
type Cluster struct {
	// Store is etcd, as the administrator (root): the API itself keeps tenants apart.
	Store *cluster.Store
	// Agents reaches the agents' endpoints (exec, link) with the administrator's certificate.
	Agents *agent.Client
	// Wait bounds how long up and down wait for the machines (0: 2 minutes).
	Wait time.Duration
}

// ErrNotInCluster is returned for an operation the API does not offer when it serves a
// cluster (impairments, terminals, capture: they need the node's machine, and the agents do
// not offer them yet).
var ErrNotInCluster = errors.New("not offered when trellis serve serves a cluster")

// caller is who makes a request to a cluster's API.
type caller struct {
	admin  bool
	tenant string // the tenant the request is about ("" for the administrator's list: all)
}

type callerKey struct{}

// callerOf returns the caller that identify put in ctx.
func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

// scoped is the tenant a request about one network is for: the caller's, or, for the
// administrator without the header, the default tenant.
func (c caller) scoped() string {
	if c.tenant == "" {
		return cluster.DefaultTenant
	}
	return c.tenant
}

// identify finds who makes request r from its client certificate: the administrator, or a
// tenant whose certificate is the one the cluster holds for it (cluster.CheckTenantCert: not a
// removed tenant's, nor one of before the tenant was added again); any other identity of the
// cluster's CA reaches nothing. An error is a Problem.
func (s *Server) identify(r *http.Request) (caller, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return caller{}, newProblem(http.StatusUnauthorized,
			"this API serves a cluster: present a client certificate of the cluster's CA (trellis tenant add issues a tenant's)")
	}
	cert := r.TLS.VerifiedChains[0][0]
	cn := cert.Subject.CommonName
	named := strings.TrimSpace(r.Header.Get(TenantHeader))
	id := cluster.ParseIdentity(cn)
	switch {
	case id.Kind == cluster.KindAdmin:
		return caller{admin: true, tenant: named}, nil
	case id.Kind != cluster.KindTenant:
		return caller{}, newProblem(http.StatusForbidden, fmt.Sprintf("the certificate of %s has no networks; use a tenant's (trellis tenant add issues them)", cn))
	case named != "" && named != id.Name:
		return caller{}, newProblem(http.StatusForbidden,
			fmt.Sprintf("the certificate of tenant %s reaches only its own networks, not tenant %s's", id.Name, named))
	}
	if err := s.cl.Store.CheckTenantCert(r.Context(), id.Name, cert); err != nil {
		if errors.Is(err, cluster.ErrRevoked) {
			return caller{}, newProblem(http.StatusForbidden, err.Error())
		}
		return caller{}, problemOf(err)
	}
	return caller{tenant: id.Name}, nil
}

// authorize identifies the caller of r and, for a path about one network (/networks/NAME...),
// checks that the tenant it is for has a network of that name; an unknown name, or another
// tenant's, is 404 with the same words. It returns r with the caller in its context.
func (s *Server) authorize(r *http.Request) (*http.Request, error) {
	c, err := s.identify(r)
	if err != nil {
		return nil, err
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/networks/"); ok {
		name, _, _ := strings.Cut(rest, "/")
		if _, err := s.cl.Store.Network(r.Context(), c.scoped(), name); err != nil {
			return nil, clusterProblem(c.scoped(), name, err)
		}
	}
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, c)), nil
}

// clusterProblem maps an error of the cluster store about tenant's network name to a Problem.
func clusterProblem(tenant, name string, err error) error {
	switch {
	case errors.Is(err, cluster.ErrNotFound), errors.Is(err, cluster.ErrBadName):
		return newProblem(http.StatusNotFound, fmt.Sprintf("tenant %s has no network %s in the cluster", tenant, name))
	case errors.Is(err, cluster.ErrOverQuota):
		return newProblem(http.StatusUnprocessableEntity, err.Error()+"; nothing was changed")
	case errors.Is(err, cluster.ErrNotGranted):
		return newProblem(http.StatusUnprocessableEntity, err.Error())
	case errors.Is(err, cluster.ErrConflict), errors.Is(err, cluster.ErrOvertaken):
		return newProblem(http.StatusConflict, err.Error())
	case errors.Is(err, cluster.ErrRefused):
		return newProblem(http.StatusUnprocessableEntity, err.Error())
	case errors.Is(err, cluster.ErrDenied):
		return newProblem(http.StatusForbidden, err.Error())
	}
	return problemOf(err)
}

// notInCluster refuses an operation the API does not offer for a cluster.
func (s *Server) notInCluster(what string) error {
	return newProblem(http.StatusNotImplemented, fmt.Sprintf("%s: %v; the CLI on the node's machine offers it", what, ErrNotInCluster))
}

// documentTenancy adds the Trellis-Tenant header to every path of the OpenAPI document, and
// says how a cluster's API keeps tenants apart.
func (s *Server) documentTenancy() {
	doc := s.api.OpenAPI()
	doc.Info.Description += " Serving a cluster: each client's tenant is its certificate's common name; a tenant reaches only its own networks " +
		"(another's is 404, as one that does not exist), the administrator's certificate (root) every tenant's, naming one in the " + TenantHeader + " header."
	for _, item := range doc.Paths {
		item.Parameters = append(item.Parameters, &huma.Param{Name: TenantHeader, In: "header", Schema: &huma.Schema{Type: "string"},
			Description: "for the administrator's certificate: the tenant the request is about (default: default; for list: every tenant). " +
				"A tenant's certificate may name only itself (another: 403)."})
	}
}
