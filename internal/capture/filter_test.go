package capture

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A filter is tcpdump's expression, never its options, whatever it begins with: tcpdump runs
// as root, and `-F FILE` would read FILE as the filter (here a file only root may read, which
// holds a filter that compiles: reading it would succeed).
func TestCompileFilterIsAnExpression(t *testing.T) {
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Fatalf("this security test needs tcpdump, which compiles filters: apt-get install tcpdump (%v)", err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("icmp\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		expr string
		ok   bool   // compiles
		want string // in the error
	}{
		{"-F" + secret, false, "pcap expression"},
		{"-V" + secret, false, "pcap expression"},
		{"--version", false, "pcap expression"},
		{"-4 < len", true, ""}, // an expression that begins with "-": a unary minus
		{"icmp or arp", true, ""},
	}
	for _, c := range cases {
		prog, err := CompileFilter(c.expr, Snaplen)
		if c.ok {
			if err != nil || len(prog) == 0 {
				t.Errorf("%q: %v; want it compiled as an expression", c.expr, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "syntax error") {
			t.Errorf("%q: %d instructions, error %v; want tcpdump's syntax error naming the filter and the rule (%q)", c.expr, len(prog), err, c.want)
		}
	}
}
