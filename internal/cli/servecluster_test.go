package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/pki"
)

// TestServeClusterRefuses runs `trellis --cluster F serve` with what it must refuse before it
// listens or dials etcd: no TLS listener, and a context file that is not the administrator's.
func TestServeClusterRefuses(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	ctxOf := func(cn string) string {
		p, err := ca.Issue(cn, pki.Client|pki.Server, []string{"127.0.0.1"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cert, key, err := p.Write(dir, cn)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, cn+".yaml")
		data := fmt.Sprintf("etcd: [https://127.0.0.1:1]\ncacert: %s\ncert: %s\nkey: %s\n", caFile, cert, key)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	alice, root, server := ctxOf("alice"), ctxOf("root"), filepath.Join(dir, "alice")
	tlsArgs := []string{"--listen", "127.0.0.1:0", "--tls-cert", server + ".crt", "--tls-key", server + ".key"}
	cases := []struct {
		name string
		args []string
		is   error
		msg  string
	}{
		{"no --listen", []string{"--cluster", root}, nil, "give --listen HOST:PORT with --tls-cert and --tls-key"},
		{"--listen without TLS", []string{"--cluster", root, "--listen", "127.0.0.1:0"}, nil, "only with TLS and client certificates"},
		{"a tenant's context", append([]string{"--cluster", alice}, tlsArgs...), ErrServeClusterAdmin, "names alice"},
		{"no context file", append([]string{"--cluster", filepath.Join(dir, "none.yaml")}, tlsArgs...), nil, "none.yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewRoot()
			var out bytes.Buffer
			r.SetOut(&out)
			r.SetErr(&out)
			r.SetArgs(append([]string{"--state-dir", filepath.Join(dir, "state"), "serve"}, c.args...))
			err := r.Execute()
			if err == nil || c.is != nil && !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %v, want %v with %q", err, c.is, c.msg)
			}
		})
	}
}
