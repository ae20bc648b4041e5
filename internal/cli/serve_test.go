package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/api"
)

// TestServeRefuses runs `trellis serve` with listen addresses and TLS flags it must refuse, and
// checks it does so before it makes its unix socket.
func TestServeRefuses(t *testing.T) {
	cases := []struct {
		name string
		args []string
		is   error
		msg  string
	}{
		{"another address without TLS", []string{"--listen", "192.0.2.1:8080"}, api.ErrNeedsTLS, "--client-ca"},
		{"every address without TLS", []string{"--listen", ":8080"}, api.ErrNeedsTLS, ""},
		{"TLS flags without --listen", []string{"--tls-cert", "a.crt", "--tls-key", "a.key", "--client-ca", "ca.crt"}, nil, "not given"},
		{"part of the TLS flags", []string{"--listen", "192.0.2.1:8080", "--tls-cert", "a.crt"}, nil, "go together"},
		{"TLS files that are not there", []string{"--listen", "192.0.2.1:8080", "--tls-cert", "/nonexistent/a.crt", "--tls-key", "/nonexistent/a.key", "--client-ca", "/nonexistent/ca.crt"}, nil, "/nonexistent/a.crt"},
		{"--token-file without --listen", []string{"--token-file", "/tmp/t"}, nil, "are for --listen"},
		{"--host without --listen", []string{"--host", "lab.example"}, nil, "are for --listen"},
		{"--host with a scheme", []string{"--listen", "127.0.0.1:0", "--host", "http://lab.example"}, api.ErrBadHost, "http://lab.example"},
		{"--host with a port", []string{"--listen", "127.0.0.1:0", "--host", "lab.example:8080"}, api.ErrBadHost, ""},
		{"a token file others may read", []string{"--listen", "127.0.0.1:0", "--token-file", worldReadable(t)}, api.ErrTokenFile, "chmod 600"},
		{"a token file in no directory", []string{"--listen", "127.0.0.1:0", "--token-file", "/nonexistent/api-token"}, api.ErrTokenFile, "/nonexistent/api-token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			root := NewRoot()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(append([]string{"--state-dir", dir, "serve"}, c.args...))
			err := root.Execute()
			if err == nil || c.is != nil && !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %v, want %v with %q", err, c.is, c.msg)
			}
			if _, err := os.Stat(filepath.Join(dir, "trellis.sock")); err == nil {
				t.Errorf("a refused serve left its socket")
			}
		})
	}
}

// worldReadable returns a token file of mode 0644.
func worldReadable(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "api-token")
	if err := os.WriteFile(p, []byte(strings.Repeat("a", 43)), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o644)
	return p
}
