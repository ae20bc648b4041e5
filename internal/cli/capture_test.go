package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `trellis capture`'s filter is tcpdump's expression, never its options (`-F FILE` would make
// tcpdump read FILE as root), and it is checked before anything else.
func TestCaptureFilterIsAnExpression(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("icmp\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"--state-dir", filepath.Join(t.TempDir(), "state"), "capture", "nope", "l", "--", "-F" + secret})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "pcap expression") {
		t.Errorf("capture with filter -F%s: %v; want the filter refused as an expression", secret, err)
	}
}

// A capture written to a file is for its user alone: it holds a network's traffic.
func TestCaptureOutputPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.pcapng")
	_, done, err := captureOutput(NewRoot(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := done(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v %v, want mode 0600", path, fi.Mode(), err)
	}
}
