package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/cluster/pki"
)

// certOf parses a pair's certificate.
func certOf(t *testing.T, p *pki.Pair) *x509.Certificate {
	t.Helper()
	c, err := p.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// issue issues a client certificate of the test cluster's CA for cn.
func issue(t *testing.T, c *etcdtest.Cluster, cn string) *pki.Pair {
	t.Helper()
	p, err := c.CA.Issue(cn, pki.Client, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// upPlaced makes tenant tn's network lab with nodes a on m1 and b on m2.
func upPlaced(t *testing.T, ctx context.Context, s *cluster.Store, tn string) {
	t.Helper()
	gen, err := s.Up(ctx, &cluster.Network{Tenant: tn, Name: "lab", Source: "name: lab\nnodes: {a: {}, b: {}}\n"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &cluster.Placement{Tenant: tn, Network: "lab", Generation: gen, Nodes: map[string]string{"a": "m1", "b": "m2"}}
	if _, err := s.PutPlacement(ctx, p, 0); err != nil {
		t.Fatal(err)
	}
}

// TestAuthorize checks whom the agent's endpoint acts for: the tenant of the client
// certificate, if it is the one the cluster holds for the tenant, for its own networks with
// nodes on the machine, and nobody else.
func TestAuthorize(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := cluster.New(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pairs := map[string]*pki.Pair{}
	for _, tn := range []string{"alice", "bob", "carol"} {
		p, err := s.AddTenant(ctx, &cluster.Tenant{Name: tn}, c.CA, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		pairs[tn] = p
	}
	for _, tn := range []string{"alice", "bob", cluster.DefaultTenant} {
		upPlaced(t, ctx, s, tn)
	}
	// carol is removed, and the administrator makes a network under her name: her certificate
	// must not reach it. Then carol is added again: her old certificate stays refused.
	if err := s.RemoveTenant(ctx, "carol"); err != nil {
		t.Fatal(err)
	}
	upPlaced(t, ctx, s, "carol")
	a := &Agent{cfg: Config{Store: s, Machine: cluster.Machine{Name: "m1"}}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var (
		r   *http.Request
		err error
	)
	rows := []struct {
		name, cert, tenant, network string
		want                        string // the tenant it acts for, or the refusal
		code                        int
	}{
		{"own network", "alice", "", "lab", "alice", 0},
		{"own network, named", "alice", "alice", "lab", "alice", 0},
		{"another tenant's", "alice", "bob", "lab", "the certificate of tenant alice reaches only its own networks, not tenant bob's", http.StatusForbidden},
		{"a network it has not", "alice", "", "nope", "tenant alice has no network nope", http.StatusNotFound},
		{"a bad name", "alice", "", "../bob/lab", "tenant alice has no network ../bob/lab", http.StatusNotFound},
		{"a certificate of the tenant's bare name", "alice", "", "lab", "runs nothing in nodes", http.StatusForbidden},
		{"an agent's certificate", cluster.AgentUser("m1"), "alice", "lab", "runs nothing in nodes", http.StatusForbidden},
		{"the placers' certificate", cluster.PlacerUser, "alice", "lab", "runs nothing in nodes", http.StatusForbidden},
		{"a removed tenant's certificate", "carol", "", "lab", "tenant carol is no tenant of the cluster", http.StatusForbidden},
		{"a re-added tenant's old certificate", "carol", "", "lab", "is not the one the cluster holds for it", http.StatusForbidden},
		{"the re-added tenant's new certificate", "carol", "", "lab", "carol", 0},
		{"the administrator, any tenant", cluster.RootUser, "bob", "lab", "bob", 0},
		{"the administrator, no tenant", cluster.RootUser, "", "lab", cluster.DefaultTenant, 0},
		{"no certificate", "", "", "lab", "no client certificate", http.StatusUnauthorized},
	}
	var carolNew *pki.Pair
	for i, tc := range rows {
		p := pairs[tc.cert]
		switch {
		case tc.name == "a certificate of the tenant's bare name", tc.cert == cluster.RootUser,
			tc.cert == cluster.PlacerUser, tc.cert == cluster.AgentUser("m1"):
			p = issue(t, c, tc.cert)
		case tc.name == "a re-added tenant's old certificate":
			if carolNew, err = s.AddTenant(ctx, &cluster.Tenant{Name: "carol"}, c.CA, time.Hour); err != nil {
				t.Fatal(err)
			}
		case tc.name == "the re-added tenant's new certificate":
			p = carolNew
		}
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, ExecPath, nil).WithContext(ctx)
			r.TLS = &tls.ConnectionState{}
			if p != nil {
				r.TLS.PeerCertificates = []*x509.Certificate{certOf(t, p)}
			}
			tenant, _, err := a.authorize(r, tc.tenant, tc.network)
			var he *httpError
			switch {
			case tc.code == 0 && (err != nil || tenant != tc.want):
				t.Errorf("row %d: got %q, %v; want it to act for %s", i, tenant, err, tc.want)
			case tc.code != 0 && (!errors.As(err, &he) || he.code != tc.code || !strings.Contains(he.msg, tc.want)):
				t.Errorf("row %d: got %q, %v; want %d %q", i, tenant, err, tc.code, tc.want)
			}
		})
	}
	// A node of its network on another machine is not this agent's to run.
	r = httptest.NewRequest(http.MethodPost, ExecPath, nil).WithContext(ctx)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{certOf(t, pairs["alice"])}}
	_, err = a.exec(r, &ExecRequest{Network: "lab", Node: "b", Argv: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "has no node b on machine m1") {
		t.Errorf("exec of a node on m2 through m1: %v", err)
	}
	t.Run("over mutual TLS", func(t *testing.T) { testServeTLS(t, c, a, pairs["carol"]) })
}

// testServeTLS runs the agent's endpoint on a TLS listener as trellis agent does, and calls exec
// through it with a removed tenant's certificate and with an etcd member's server certificate.
func testServeTLS(t *testing.T, c *etcdtest.Cluster, a *Agent, carolOld *pki.Pair) {
	dir := t.TempDir()
	agentPair, err := c.CA.Issue(cluster.AgentUser("m1"), pki.Client|pki.Server, []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	files := func(p *pki.Pair, name string) pki.Files {
		f := pki.Files{CA: c.Root.CA}
		if f.Cert, f.Key, err = p.Write(dir, name); err != nil {
			t.Fatal(err)
		}
		return f
	}
	sc, err := files(agentPair, "agent").ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.serve(ctx, tls.NewListener(l, sc))
	url := "https://" + l.Addr().String()
	for _, tc := range []struct {
		name  string
		files pki.Files
		want  string
	}{
		{"a re-added tenant's old certificate", files(carolOld, "carol-old"), "is not the one the cluster holds for it"},
		{"an etcd member's server certificate", pki.Files{CA: c.Root.CA, Cert: filepath.Join(c.Dir, "m1.crt"), Key: filepath.Join(c.Dir, "m1.key")}, "certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc, err := tc.files.ClientConfig()
			if err != nil {
				t.Fatal(err)
			}
			_, err = NewClient(cc).Exec(ctx, url, &ExecRequest{Network: "lab", Node: "a", Argv: []string{"true"}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("exec: %v; want a refusal saying %q", err, tc.want)
			}
		})
	}
}
