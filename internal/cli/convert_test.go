package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNetworkName: down takes a network's name, or a topology file (trellis's or
// containerlab's) whose name: it reads.
func TestNetworkName(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	clabFile := write("lab.clab.yml", "name: frr01\ntopology:\n  nodes: {}\n")
	trellisFile := write("two.yaml", "name: two\nnodes: {}\n")
	noName := write("x.yaml", "nodes: {}\n")
	// The state directory of a cluster machine, whose agent names networks TENANT.NETWORK.
	records := map[string]bool{"alice.chain": true, filepath.Join(dir, "two.yaml"): true}
	for _, tt := range []struct{ arg, want, err string }{
		{"lab1", "lab1", ""},
		{clabFile, "frr01", ""},
		{trellisFile, "two", ""},
		{noName, "", "a topology file without a name"},
		{filepath.Join(dir, "gone.clab.yml"), "", "not a network's name"},
		{"alice.chain", "alice.chain", ""},
		{"bob.chain", "", "not a network's name"},
	} {
		got, err := networkName(tt.arg, func(name string) bool { return records[name] })
		if got != tt.want || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("networkName(%q) = %q, %v; want %q, error %q", tt.arg, got, err, tt.want, tt.err)
		}
	}
}

// TestConvertCommand: `trellis convert` prints the converted file, and refuses a key it cannot
// honour with the file's line, printing nothing.
func TestConvertCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "lab.clab.yml")
	bad := filepath.Join(dir, "bad.clab.yml")
	os.WriteFile(good, []byte("name: l\ntopology:\n  nodes:\n    a: {kind: linux}\n    b: {kind: linux}\n  links:\n    - endpoints: [\"a:eth1\", \"b:eth1\"]\n"), 0o644)
	os.WriteFile(bad, []byte("name: l\nmgmt: {network: m}\ntopology:\n  nodes:\n    a: {kind: linux}\n"), 0o644)
	run := func(file string) (string, error) {
		var out bytes.Buffer
		root := NewRoot()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{"convert", file})
		err := root.Execute()
		return out.String(), err
	}
	out, err := run(good)
	if err != nil || !strings.Contains(out, "nodes:\n  a: {}\n  b: {}\nlinks:\n  - endpoints:\n      - a:eth1\n      - b:eth1\n") {
		t.Errorf("convert %s: %v\n%s", good, err, out)
	}
	out, err = run(bad)
	if err == nil || out != "" || !strings.Contains(err.Error(), bad+":2: mgmt: trellis cannot honour it") {
		t.Errorf("convert %s: %v, printed %q; want refused at line 2, nothing printed", bad, err, out)
	}
}
