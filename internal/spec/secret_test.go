package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecret: `secret:` names a file beside the topology file whose content keys the tunnels;
// a missing or short file, or a network without hosts, is refused with the field and the fix.
func TestSecret(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"good.key": "0123456789abcdef0123", "short.key": "0123456789"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const hosts = "hosts:\n  m1: {address: 198.18.0.1}\n  m2: {address: 198.18.0.2}\n"
	const rest = "nodes:\n  a: {host: m1}\n  b: {host: m2}\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n"
	for _, tc := range []struct {
		name, doc string
		err       string // "" = success
	}{
		{"a file of random bytes", "name: s\n" + hosts + "secret: good.key\n" + rest, ""},
		{"missing", "name: s\n" + hosts + "secret: none.key\n" + rest, "secret: cannot read " + filepath.Join(dir, "none.key")},
		{"short", "name: s\n" + hosts + "secret: short.key\n" + rest, "secret: the file has 10 bytes, fewer than 16; fill it with random bytes, the same file on every host"},
		{"no hosts", "name: s\nsecret: good.key\nnodes:\n  a: {}\n", "secret: the secret keys the tunnels between hosts, and the network has none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := Parse(filepath.Join(dir, "s.yaml"), []byte(tc.doc))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse: %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(n.TunnelSecret) != "0123456789abcdef0123" {
				t.Errorf("TunnelSecret %q", n.TunnelSecret)
			}
		})
	}
}
