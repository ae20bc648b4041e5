package spec

import (
	"errors"
	"strings"
	"testing"
)

// TestParseCluster checks the rules of a cluster's topology file: no hosts section, pins to any
// machine, a tunnel of its own, `source:` files read through the reader given.
func TestParseCluster(t *testing.T) {
	const nodes = "nodes:\n  a:\n    host: m7\n  b:\n    files:\n      - path: /etc/x.conf\n        source: x.conf\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n"
	read := func(path string) ([]byte, error) {
		if path != "/top/x.conf" {
			return nil, errors.New("no such file")
		}
		return []byte("x = 1\n"), nil
	}
	for _, tc := range []struct {
		name, file string
		tunnel     string // want, on success
		err        string // want in the error; "" = success
	}{
		{"pins and sources", "name: lab\n" + nodes, EGRE, ""},
		{"tunnel alone", "name: lab\ntunnel: vxlan\n" + nodes, VXLAN, ""},
		{"unknown tunnel", "name: lab\ntunnel: carrier-pigeon\n" + nodes, "", `/top/lab.yaml:2: tunnel: unknown tunnel "carrier-pigeon"`},
		{"hosts refused", "name: lab\nhosts:\n  m1: {address: 198.18.0.1}\n" + nodes, "", "/top/lab.yaml:3: hosts: a cluster's machines are those whose agents registered"},
		{"secret refused", "name: lab\nsecret: x.conf\n" + nodes, "", "/top/lab.yaml:2: secret: a cluster's tunnel keys derive from a random secret the placer draws"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := ParseCluster("/top/lab.yaml", []byte(tc.file), read)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseCluster: %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n.Tunnel != tc.tunnel || n.Node("a").Host != "m7" || len(n.Hosts) != 0 || n.Node("b").Files[0].Content != "x = 1\n" {
				t.Errorf("parsed tunnel %q, a on %q, hosts %v, b's file %q", n.Tunnel, n.Node("a").Host, n.Hosts, n.Node("b").Files[0].Content)
			}
		})
	}
	// The same file is refused on one machine: its pin names no host.
	if _, err := parse("/top/lab.yaml", []byte("name: lab\n"+nodes), read); err == nil || !strings.Contains(err.Error(), `no host named "m7"`) {
		t.Errorf("Parse of a pinned node without hosts: %v, want no host named m7", err)
	}
}
