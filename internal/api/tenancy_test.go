package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/trellisnet/trellis/internal/substrate"
)

// TestIdentify checks who a request is made by, from its verified client certificate and the
// Trellis-Tenant header, for the cases decided before a tenant is looked up in etcd.
func TestIdentify(t *testing.T) {
	cases := []struct {
		name, cn, header string
		want             caller
		status           int
	}{
		{"no certificate", "", "", caller{}, 401},
		{"the administrator", "root", "", caller{admin: true}, 0},
		{"the administrator naming a tenant", "root", "bob", caller{admin: true, tenant: "bob"}, 0},
		{"an agent", "agent:m1", "", caller{}, 403},
		{"the placers", "placer", "", caller{}, 403},
		{"a name of no identity (an etcd member's)", "e1", "", caller{}, 403},
		{"a tenant naming another", "tenant:alice:1", "bob", caller{}, 403},
	}
	s := &Server{cl: &Cluster{}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/networks/lab", nil)
			if c.cn != "" {
				cert := &x509.Certificate{Subject: pkix.Name{CommonName: c.cn}}
				r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}
			}
			if c.header != "" {
				r.Header.Set(TenantHeader, c.header)
			}
			got, err := s.identify(r)
			var p *Problem
			switch {
			case c.status == 0 && (err != nil || got != c.want):
				t.Errorf("identify: %+v, %v; want %+v", got, err, c.want)
			case c.status != 0 && (!errors.As(err, &p) || p.Status != c.status):
				t.Errorf("identify: %+v, %v; want a %d problem", got, err, c.status)
			}
		})
	}
	if d := (caller{admin: true}).scoped(); d != "default" {
		t.Errorf("the administrator's tenant without the header: %q, want default", d)
	}
}

func TestChangesOf(t *testing.T) {
	got := changesOf([]string{"+ node c", "- link r2-r3", "~ link ab: rate 10mbit -> 50mbit",
		"! node r3 (restarts): kind changed", "something else"})
	want := []substrate.Change{
		{Op: "add", Object: "node", Name: "c"},
		{Op: "remove", Object: "link", Name: "r2-r3"},
		{Op: "change", Object: "link", Name: "ab", What: []string{"rate 10mbit -> 50mbit"}},
		{Op: "restart", Object: "node", Name: "r3", What: []string{"(restarts): kind changed"}},
		{Op: "change", What: []string{"something else"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("changesOf:\n%+v\nwant\n%+v", got, want)
	}
}

// TestClusterOpenAPI: a cluster's API documents the tenant header on every path; a state
// directory's has none.
func TestClusterOpenAPI(t *testing.T) {
	for _, cl := range []*Cluster{nil, {}} {
		doc := New(context.Background(), nil, Options{Cluster: cl}).OpenAPI()
		for path, item := range doc.Paths {
			has := len(item.Parameters) > 0 && item.Parameters[len(item.Parameters)-1].Name == TenantHeader
			if has != (cl != nil) {
				t.Errorf("cluster %v: %s has the tenant header: %v", cl != nil, path, has)
			}
		}
	}
}
