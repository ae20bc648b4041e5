package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/trellisnet/trellis/internal/kinds/all" // the kinds the files name
	"github.com/trellisnet/trellis/internal/spec"
)

func TestLoadContext(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file string
		err        string // "" = success
	}{
		{"complete", "etcd: [https://10.0.0.1:2379]\ncacert: ca.crt\ncert: /etc/t/me.crt\nkey: me.key\ntenant: t1\n", ""},
		{"default tenant", "etcd: [https://10.0.0.1:2379]\ncacert: ca.crt\ncert: me.crt\nkey: me.key\n", ""},
		{"unknown key", "etcd: [https://10.0.0.1:2379]\ncacert: ca.crt\ncert: me.crt\nkey: me.key\ntennant: t1\n", "line 5: field tennant not found"},
		{"missing", "etcd: []\ncacert: ca.crt\n", "cert: missing"},
		{"no etcd", "cacert: ca.crt\ncert: me.crt\nkey: me.key\n", "etcd: missing"},
		{"bad tenant", "etcd: [https://10.0.0.1:2379]\ncacert: ca.crt\ncert: me.crt\nkey: me.key\ntenant: a/b\n", "tenant: bad name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := LoadContext(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), path) {
					t.Fatalf("LoadContext: %v, want an error naming %s and saying %q", err, path, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.CACert != filepath.Join(dir, "ca.crt") || !filepath.IsAbs(c.Cert) || c.Tenant == "" {
				t.Errorf("LoadContext: %+v: want paths relative to the file made absolute and a tenant", c)
			}
		})
	}
	if _, err := LoadContext(filepath.Join(dir, "none.yaml")); err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Errorf("LoadContext of a missing file: %v", err)
	}
}

func TestDiffSpecs(t *testing.T) {
	base := "name: n\nnodes:\n  a: {}\n  b:\n    addresses: {eth1: [10.0.0.2/24]}\n  c: {}\nlinks:\n  - {name: ab, endpoints: [a:eth1, b:eth1]}\n  - {name: bc, endpoints: [b:eth2, c:eth1]}\n"
	parse := func(t *testing.T, src string) *spec.Network {
		n, err := spec.ParseCluster("/t/n.yaml", []byte(src), nil)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		name string
		old  string // "" = no network yet
		new  string
		want []string
	}{
		{"same", base, base, nil},
		{"new network", "", base, []string{"+ node a", "+ node b", "+ node c", "+ link ab", "+ link bc"}},
		{"rate", base, strings.Replace(base, "name: ab,", "name: ab, rate: 10mbit,", 1), []string{"~ link ab: rate none -> 10mbit"}},
		{"node gone with its link", base, strings.Replace(strings.Replace(base, "  c: {}\n", "", 1), "  - {name: bc, endpoints: [b:eth2, c:eth1]}\n", "", 1), []string{"- node c", "- link bc"}},
		{"sysctl restarts", base, strings.Replace(base, "  a: {}", "  a: {sysctl: {net.ipv4.ip_forward: \"0\"}}", 1), []string{"! node a (restarts): kind, loopback addresses, sysctl, files or exec changed"}},
		{"pin moves", base, strings.Replace(base, "  a: {}", "  a: {host: m2}", 1), []string{`! node a (moves): host "" -> "m2"`}},
		{"addresses", base, strings.Replace(base, "10.0.0.2/24", "10.0.0.3/24", 1), []string{"~ node b: interface addresses"}},
		{"lan settings", strings.Replace(base, "name: bc,", "name: bc, connector: lan, table: 64,", 1), strings.Replace(base, "name: bc,", "name: bc, connector: lan, table: 128,", 1), []string{"~ link bc: table 64 -> 128"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var old *spec.Network
			if tc.old != "" {
				old = parse(t, tc.old)
			}
			got := DiffSpecs(old, parse(t, tc.new))
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("DiffSpecs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
