package api

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ErrNeedsTLS is returned for a listen address other than the loopback without TLS and client
// certificates: whoever reaches the API can run commands as root in nodes.
var ErrNeedsTLS = errors.New("an address other than loopback is served only with TLS and client certificates: give --tls-cert, --tls-key and --client-ca")

// ListenUnix listens on the unix socket path, which only its owner (root) may use (mode
// 0600). A socket file left by a server that is gone is replaced; one that a live server
// answers on is an error.
func ListenUnix(path string) (net.Listener, error) {
	if _, err := os.Lstat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("serve: %s: another trellis serve is listening there", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("serve: removing the stale socket: %w", err)
		}
	}
	old := syscall.Umask(0o177) // the socket is made 0600, with no moment of a wider mode
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return l, nil
}

// TLS names the PEM files of a TLS listener: the server's certificate and key, and the CA
// whose certificates clients must present.
type TLS struct {
	Cert, Key, ClientCA string
}

// IsZero tells whether no file is named.
func (t TLS) IsZero() bool { return t == TLS{} }

// Config reads the files into a server configuration that asks every client for a certificate
// signed by the client CA and refuses those without one. Errors name the file that is wrong.
func (t TLS) Config() (*tls.Config, error) {
	if t.Cert == "" || t.Key == "" || t.ClientCA == "" {
		return nil, fmt.Errorf("serve: --tls-cert, --tls-key and --client-ca go together (have %q, %q, %q)", t.Cert, t.Key, t.ClientCA)
	}
	pair, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, fmt.Errorf("serve: --tls-cert %s with --tls-key %s: %w", t.Cert, t.Key, err)
	}
	if leaf, err := x509.ParseCertificate(pair.Certificate[0]); err == nil && time.Now().After(leaf.NotAfter) {
		return nil, fmt.Errorf("serve: --tls-cert %s expired at %s; issue a new one", t.Cert, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	caPEM, err := os.ReadFile(t.ClientCA)
	if err != nil {
		return nil, fmt.Errorf("serve: --client-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("serve: --client-ca %s holds no PEM certificate", t.ClientCA)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS12}, nil
}

// Listen listens on the TCP address addr (HOST:PORT). With t's files it serves TLS and asks
// every client for a certificate of t's client CA; without, only a loopback host (or
// localhost) is accepted (ErrNeedsTLS). Checks come before the socket is made.
func Listen(addr string, t TLS) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("serve: --listen %q: %w; write HOST:PORT, e.g. 127.0.0.1:8080", addr, err)
	}
	var cfg *tls.Config
	if !t.IsZero() {
		if cfg, err = t.Config(); err != nil {
			return nil, err
		}
	} else if !isLoopback(host) {
		return nil, fmt.Errorf("serve: --listen %s: %w", addr, ErrNeedsTLS)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	if cfg != nil {
		l = tls.NewListener(l, cfg)
	}
	return l, nil
}

// isLoopback tells whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func fprintf(w io.Writer, format string, args ...any) { fmt.Fprintf(w, format, args...) }

// ErrBadHost is returned for a --host that is not a host name or address.
var ErrBadHost = errors.New("--host takes a name or address the server is reached by, without scheme or port (e.g. lab.example.com)")

// Hosts returns the names a server listening on addr (HOST:PORT) is reached by, as Access
// takes them: the listen address; for a loopback one, localhost and both loopback addresses;
// for the unspecified address, every address of the machine; the names and addresses of t's
// server certificate; and extra (--host).
func Hosts(addr string, t TLS, extra []string) ([]string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("serve: --listen %q: %w", addr, err)
	}
	var names []string
	ip := net.ParseIP(host)
	switch {
	case isLoopback(host):
		names = append(names, host, "localhost", "127.0.0.1", "::1")
	case host != "" && (ip == nil || !ip.IsUnspecified()):
		names = append(names, host)
	default: // the unspecified address: every address of the machine
		addrs, _ := net.InterfaceAddrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				names = append(names, n.IP.String())
			}
		}
		names = append(names, "localhost")
	}
	if t.Cert != "" {
		pair, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("serve: --tls-cert %s: %w", t.Cert, err)
		}
		if leaf, err := x509.ParseCertificate(pair.Certificate[0]); err == nil {
			names = append(names, leaf.DNSNames...)
			for _, ip := range leaf.IPAddresses {
				names = append(names, ip.String())
			}
		}
	}
	for _, h := range extra {
		if h == "" || strings.ContainsAny(h, ":/@?# ") && net.ParseIP(strings.Trim(h, "[]")) == nil {
			return nil, fmt.Errorf("serve: --host %q: %w", h, ErrBadHost)
		}
		names = append(names, h)
	}
	var out []string
	for _, n := range names {
		if n = hostname(n); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}
