package cli

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/cluster/pki"
)

// TestCertCLI makes a CA and certificates with `trellis cert`, and checks what they are for.
func TestCertCLI(t *testing.T) {
	dir := t.TempDir()
	ca, key := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	peerCA, peerKey := filepath.Join(dir, "peer-ca.crt"), filepath.Join(dir, "peer-ca.key")
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error; "" for success
	}{
		{"ca", []string{"cert", "ca", "--out", dir}, ""},
		{"ca again", []string{"cert", "ca", "--out", dir}, "ca.key exists"},
		{"client", []string{"cert", "issue", "root", "--ca", ca, "--ca-key", key, "--out", dir}, ""},
		{"peers' ca", []string{"cert", "ca", "--peer", "--out", dir}, ""},
		{"server", []string{"cert", "issue", "e1", "--ca", ca, "--ca-key", key, "--out", dir, "--hosts", "198.18.0.1, localhost"}, ""},
		{"peer", []string{"cert", "issue", "e1", "--peer", "--ca", peerCA, "--ca-key", peerKey, "--out", dir, "--hosts", "198.18.0.1"}, ""},
		{"peer without hosts", []string{"cert", "issue", "e1", "--peer", "--ca", peerCA, "--ca-key", peerKey, "--out", dir}, "--peer needs --hosts"},
		{"a tenant's name", []string{"cert", "issue", "tenant:alice:1", "--ca", ca, "--ca-key", key, "--out", dir}, "issued by trellis tenant add"},
		{"an agent's name", []string{"cert", "issue", "agent:m1", "--ca", ca, "--ca-key", key, "--out", dir}, "issued by trellis machine add"},
		{"no CA given", []string{"cert", "issue", "x", "--out", dir}, "--ca and --ca-key"},
		{"key of no CA", []string{"cert", "issue", "x", "--ca", ca, "--ca-key", filepath.Join(dir, "root.key"), "--out", dir}, "does not belong"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, tc.args...)
			if tc.want == "" && err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
	leaf := func(name string) *x509.Certificate {
		data, _ := os.ReadFile(filepath.Join(dir, name+".crt"))
		b, _ := pem.Decode(data)
		if b == nil {
			t.Fatalf("%s.crt: no PEM", name)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := leaf("root"); c.Subject.CommonName != "root" || len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("root: CN %q, usages %v; want root, client only", c.Subject.CommonName, c.ExtKeyUsage)
	}
	// A server certificate is no client: a member's cannot act as a tenant named like it.
	if c := leaf("e1"); len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth || len(c.IPAddresses) != 1 || c.IPAddresses[0].String() != "198.18.0.1" || c.DNSNames[0] != "localhost" {
		t.Errorf("e1: usages %v, IPs %v, names %v; want a server only, for 198.18.0.1 and localhost", c.ExtKeyUsage, c.IPAddresses, c.DNSNames)
	}
	p := leaf("e1-peer")
	if len(p.ExtKeyUsage) != 2 || p.Issuer.CommonName != "trellis etcd peers CA" {
		t.Errorf("e1-peer: usages %v, issuer %q; want client and server, of the peers' CA", p.ExtKeyUsage, p.Issuer.CommonName)
	}
	f := pki.Files{CA: ca, Cert: filepath.Join(dir, "e1.crt"), Key: filepath.Join(dir, "e1.key")}
	if _, err := f.ServerConfig(); err != nil {
		t.Error(err)
	}
}
