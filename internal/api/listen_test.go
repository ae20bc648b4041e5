package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/pki"
)

// certs are PEM files made for a test: a CA, a server certificate for 127.0.0.1 and
// 198.18.0.1, a client certificate of the CA, one of another CA, and an expired server one.
type certs struct {
	ca, serverCert, serverKey, clientCert, clientKey, otherCert, otherKey, expiredCert, expiredKey string
}

func makeCerts(t testing.TB) certs {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var c certs
	c.ca = filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(c.ca, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	issue := func(ca *pki.CA, cn string, u pki.Usage, validFor time.Duration) (string, string) {
		p, err := ca.Issue(cn, u, []string{"127.0.0.1", "198.18.0.1", "localhost"}, validFor)
		if err != nil {
			t.Fatal(err)
		}
		cert, key, err := p.Write(dir, cn)
		if err != nil {
			t.Fatal(err)
		}
		return cert, key
	}
	c.serverCert, c.serverKey = issue(ca, "server", pki.Server, time.Hour)
	c.clientCert, c.clientKey = issue(ca, "client", pki.Client, time.Hour)
	c.otherCert, c.otherKey = issue(other, "stranger", pki.Client, time.Hour)
	c.expiredCert, c.expiredKey = issue(ca, "expired", pki.Server, -time.Second)
	return c
}

// client returns an HTTPS client that trusts the test CA and presents cert (none if "").
func (c certs) client(t testing.TB, cert, key string, dial func(addr string) (net.Conn, error)) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	data, _ := os.ReadFile(c.ca)
	pool.AppendCertsFromPEM(data)
	cfg := &tls.Config{RootCAs: pool}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		// Presented whatever CAs the server asks for, so that the server's check is what refuses
		// a certificate of another CA.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	tr := &http.Transport{TLSClientConfig: cfg}
	if dial != nil {
		tr.DialContext = func(_ context.Context, _, addr string) (net.Conn, error) { return dial(addr) }
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// TestListenRefuses checks the listen addresses and TLS files Listen refuses, before it makes
// any socket.
func TestListenRefuses(t *testing.T) {
	c := makeCerts(t)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o644)
	full := TLS{Cert: c.serverCert, Key: c.serverKey, ClientCA: c.ca}
	cases := []struct {
		name, addr string
		tls        TLS
		is         error
		msg        string
	}{
		{"another address without TLS", "192.0.2.1:8080", TLS{}, ErrNeedsTLS, "--tls-cert, --tls-key and --client-ca"},
		{"every address without TLS", ":8080", TLS{}, ErrNeedsTLS, "--listen :8080"},
		{"the unspecified address without TLS", "0.0.0.0:8080", TLS{}, ErrNeedsTLS, ""},
		{"no port", "127.0.0.1", TLS{}, nil, "write HOST:PORT"},
		{"a certificate without a key", "192.0.2.1:8080", TLS{Cert: c.serverCert, ClientCA: c.ca}, nil, "go together"},
		{"TLS without client CA", "192.0.2.1:8080", TLS{Cert: c.serverCert, Key: c.serverKey}, nil, "go together"},
		{"a key of another certificate", "192.0.2.1:8080", TLS{Cert: c.serverCert, Key: c.clientKey, ClientCA: c.ca}, nil, "--tls-key " + c.clientKey},
		{"an expired certificate", "192.0.2.1:8080", TLS{Cert: c.expiredCert, Key: c.expiredKey, ClientCA: c.ca}, nil, "expired"},
		{"a client CA that is not PEM", "192.0.2.1:8080", TLS{Cert: c.serverCert, Key: c.serverKey, ClientCA: notPEM}, nil, notPEM + " holds no PEM"},
		{"a client CA that is not there", "192.0.2.1:8080", TLS{Cert: c.serverCert, Key: c.serverKey, ClientCA: "/nonexistent/ca.crt"}, nil, "/nonexistent/ca.crt"},
		{"TLS, but an address of no interface here", "192.0.2.1:8080", full, nil, "cannot assign requested address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Listen(tc.addr, tc.tls)
			if err == nil {
				l.Close()
				t.Fatalf("Listen(%q) works, want an error", tc.addr)
			}
			if tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q, want %v with %q", err, tc.is, tc.msg)
			}
		})
	}
}

// TestListenTLS serves on loopback with TLS and client certificates and checks who gets in:
// a client with a certificate of the client CA; not one without a certificate, with one of
// another CA, or speaking plain HTTP.
func TestListenTLS(t *testing.T) {
	c := makeCerts(t)
	l, err := Listen("127.0.0.1:0", TLS{Cert: c.serverCert, Key: c.serverKey, ClientCA: c.ca})
	if err != nil {
		t.Fatal(err)
	}
	checkTLSServer(t, c, l, nil)
}

// checkTLSServer serves on l and checks who gets in; dial, if not nil, dials the server.
func checkTLSServer(t *testing.T, c certs, l net.Listener, dial func(addr string) (net.Conn, error)) {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello "+r.TLS.PeerCertificates[0].Subject.CommonName)
	}), ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(l)
	defer srv.Close()
	url := "https://" + l.Addr().String() + "/"
	resp, err := c.client(t, c.clientCert, c.clientKey, dial).Get(url)
	if err != nil {
		t.Fatalf("a client with a certificate of the client CA: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello client" {
		t.Errorf("answer %q", body)
	}
	refused := []struct {
		name, cert, key string
	}{
		{"no client certificate", "", ""},
		{"a certificate of another CA", c.otherCert, c.otherKey},
	}
	for _, r := range refused {
		if resp, err := c.client(t, r.cert, r.key, dial).Get(url); err == nil {
			resp.Body.Close()
			t.Errorf("%s: got in (%s)", r.name, resp.Status)
		}
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if dial != nil {
		plain.Transport = &http.Transport{DialContext: func(_ context.Context, _, addr string) (net.Conn, error) { return dial(addr) }}
	}
	if resp, err := plain.Get("http://" + l.Addr().String() + "/"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "hello") {
			t.Errorf("plain HTTP got in: %s %q", resp.Status, body)
		}
	}
}

// TestHosts checks the names a listener is reached by, and the --host names refused.
func TestHosts(t *testing.T) {
	cases := []struct {
		addr  string
		extra []string
		want  []string // among the names
		not   []string // not among them
		err   error
	}{
		{"127.0.0.1:8080", nil, []string{"127.0.0.1", "localhost", "::1"}, []string{"evil.example", ""}, nil},
		{"[::1]:8080", nil, []string{"::1", "localhost", "127.0.0.1"}, nil, nil},
		{"localhost:8080", []string{"Lab.Example.", "[fd00::1]", "fd00::2"}, []string{"localhost", "lab.example", "fd00::1", "fd00::2"}, nil, nil},
		{"0.0.0.0:8443", nil, []string{"127.0.0.1", "localhost"}, []string{"0.0.0.0"}, nil},
		{"127.0.0.1:8080", []string{"http://lab.example"}, nil, nil, ErrBadHost},
		{"127.0.0.1:8080", []string{"lab.example:8080"}, nil, nil, ErrBadHost},
		{"127.0.0.1:8080", []string{""}, nil, nil, ErrBadHost},
	}
	for _, c := range cases {
		names, err := Hosts(c.addr, TLS{}, c.extra)
		if !errors.Is(err, c.err) {
			t.Errorf("Hosts(%s, %v): error %v, want %v", c.addr, c.extra, err, c.err)
			continue
		}
		for _, w := range c.want {
			if !slices.Contains(names, w) {
				t.Errorf("Hosts(%s, %v) = %v, want %q among them", c.addr, c.extra, names, w)
			}
		}
		for _, n := range c.not {
			if slices.Contains(names, n) {
				t.Errorf("Hosts(%s, %v) = %v, want no %q", c.addr, c.extra, names, n)
			}
		}
	}
}
