package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
)

// TestAuthorize checks whom the agent's endpoint acts for: the tenant of the client
// certificate, for its own networks with nodes on the machine, and nobody else.
func TestAuthorize(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := cluster.New(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tn := range []string{"alice", "bob", cluster.DefaultTenant} {
		gen, err := s.Up(ctx, &cluster.Network{Tenant: tn, Name: "lab", Source: "x"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		p := &cluster.Placement{Tenant: tn, Network: "lab", Generation: gen, Nodes: map[string]string{"a": "m1", "b": "m2"}}
		if _, err := s.PutPlacement(ctx, p, 0); err != nil {
			t.Fatal(err)
		}
	}
	a := &Agent{cfg: Config{Store: s, Machine: cluster.Machine{Name: "m1"}}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, tc := range []struct {
		name, cn, tenant, network string
		want                      string // the tenant it acts for, or the refusal
		code                      int
	}{
		{"own network", "alice", "", "lab", "alice", 0},
		{"own network, named", "alice", "alice", "lab", "alice", 0},
		{"another tenant's", "alice", "bob", "lab", "the certificate of tenant alice reaches only its own networks, not tenant bob's", http.StatusForbidden},
		{"a network it has not", "alice", "", "nope", "tenant alice has no network nope", http.StatusNotFound},
		{"a bad name", "alice", "", "../bob/lab", "tenant alice has no network ../bob/lab", http.StatusNotFound},
		{"the agents' certificate", cluster.AgentUser, "alice", "lab", "the agents' certificate runs nothing in nodes", http.StatusForbidden},
		{"the administrator, any tenant", cluster.RootUser, "bob", "lab", "bob", 0},
		{"the administrator, no tenant", cluster.RootUser, "", "lab", cluster.DefaultTenant, 0},
		{"no certificate", "", "", "lab", "no client certificate", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, ExecPath, nil).WithContext(ctx)
			r.TLS = &tls.ConnectionState{}
			if tc.cn != "" {
				r.TLS.PeerCertificates = []*x509.Certificate{{Subject: pkix.Name{CommonName: tc.cn}}}
			}
			tenant, _, err := a.authorize(r, tc.tenant, tc.network)
			var he *httpError
			switch {
			case tc.code == 0 && (err != nil || tenant != tc.want):
				t.Errorf("got %q, %v; want it to act for %s", tenant, err, tc.want)
			case tc.code != 0 && (!errors.As(err, &he) || he.code != tc.code || !strings.Contains(he.msg, tc.want)):
				t.Errorf("got %q, %v; want %d %q", tenant, err, tc.code, tc.want)
			}
		})
	}
	// A node of its network on another machine is not this agent's to run.
	r := httptest.NewRequest(http.MethodPost, ExecPath, nil).WithContext(ctx)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Subject: pkix.Name{CommonName: "alice"}}}}
	_, err := a.exec(r, &ExecRequest{Network: "lab", Node: "b", Argv: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "has no node b on machine m1") {
		t.Errorf("exec of a node on m2 through m1: %v", err)
	}
}
