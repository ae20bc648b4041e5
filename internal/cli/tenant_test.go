package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
)

// run runs the trellis command with args and returns its output and error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

const labTopo = "name: lab\nnodes:\n  a:\n    addresses: {eth1: [10.0.0.1/24]}\n  b:\n    addresses: {eth1: [10.0.0.2/24]}\nlinks:\n  - {name: ab, endpoints: [a:eth1, b:eth1]}\n"

// TestTenantCLI makes tenants with `trellis tenant add` as the administrator, and checks that
// through the CLI a tenant sees only its own networks, that a context file naming another
// tenant with its certificate is refused for every verb, and that quotas hold on up.
func TestTenantCLI(t *testing.T) {
	c := etcdtest.Start(t, 1)
	dir := t.TempDir()
	caKey := filepath.Join(dir, "ca.key")
	if err := c.CA.WriteKey(caKey); err != nil {
		t.Fatal(err)
	}
	admin := filepath.Join(dir, "admin.yaml")
	os.WriteFile(admin, []byte("etcd: ["+strings.Join(c.Endpoints, ", ")+"]\ncacert: "+c.Root.CA+"\ncert: "+c.Root.Cert+"\nkey: "+c.Root.Key+"\n"), 0o600)
	if _, err := run(t, "--cluster", admin, "tenant", "add", "alice"); err == nil || !strings.Contains(err.Error(), "--ca-key") {
		t.Fatalf("tenant add without --ca-key: %v", err)
	}
	for _, name := range []string{"alice", "bob"} {
		out, err := run(t, "--cluster", admin, "tenant", "add", name, "--ca-key", caKey, "--out", filepath.Join(dir, name), "--nodes", "3")
		if err != nil {
			t.Fatalf("tenant add %s: %v\n%s", name, err, out)
		}
	}
	ctxFile := func(name string) string { return filepath.Join(dir, name, name+".yaml") }
	lab := filepath.Join(dir, "lab.yaml")
	os.WriteFile(lab, []byte(labTopo), 0o644)
	for _, name := range []string{"alice", "bob"} { // both have a lab, with the same addresses
		cc, err := cluster.LoadContext(ctxFile(name))
		if err != nil {
			t.Fatal(err)
		}
		s, err := cluster.Dial(context.Background(), cc.Config())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Up(context.Background(), &cluster.Network{Tenant: name, Name: "lab", File: "/" + name + "/lab.yaml", Source: labTopo}, 0); err != nil {
			t.Fatalf("%s: up of lab: %v", name, err)
		}
		s.Close()
	}
	forged := filepath.Join(dir, "alice", "forged.yaml") // alice's certificate, bob's tenant
	data, _ := os.ReadFile(ctxFile("alice"))
	os.WriteFile(forged, bytes.Replace(data, []byte("tenant: alice"), []byte("tenant: bob"), 1), 0o600)
	big := filepath.Join(dir, "big.yaml")
	os.WriteFile(big, []byte("name: big\nnodes:\n  a: {}\n  b: {}\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want string // in the output, or in the error if err
		err  bool
	}{
		{"ls shows only its own", []string{"--cluster", ctxFile("alice"), "ls"}, "/alice/lab.yaml", false},
		{"inspect its own lab", []string{"--cluster", ctxFile("alice"), "inspect", "lab"}, "network lab of tenant alice", false},
		{"ls as bob", []string{"--cluster", forged, "ls"}, "permission denied", true},
		{"inspect bob's lab", []string{"--cluster", forged, "inspect", "lab"}, "permission denied", true},
		{"diff against bob's lab", []string{"--cluster", forged, "diff", lab}, "permission denied", true},
		{"up bob's lab", []string{"--cluster", forged, "up", lab}, "permission denied", true},
		{"down bob's lab", []string{"--cluster", forged, "down", "lab"}, "permission denied", true},
		{"tenant ls as a tenant", []string{"--cluster", ctxFile("alice"), "tenant", "ls"}, "permission denied", true},
		{"add a tenant as a tenant", []string{"--cluster", ctxFile("alice"), "tenant", "add", "eve", "--ca-key", caKey, "--out", dir}, "permission denied", true},
		{"over quota", []string{"--cluster", ctxFile("alice"), "up", big}, "over quota: tenant alice with network big: nodes: 4, quota 3; nothing was changed", true},
		{"tenant ls as the administrator", []string{"--cluster", admin, "tenant", "ls"}, "alice   1         nodes 2, cpus -, memory 512M, pids 2048  nodes 3, cpus -, memory -, pids -", false},
		{"rm a tenant with networks", []string{"--cluster", admin, "tenant", "rm", "bob"}, "still has 1 networks", true},
		{"tenant add default", []string{"--cluster", admin, "tenant", "add", "default", "--ca-key", caKey, "--out", dir}, `tenant "default": the name is reserved: it holds the administrator's own networks`, true},
		{"tenant add root", []string{"--cluster", admin, "tenant", "add", "root", "--ca-key", caKey, "--out", dir}, `tenant "root": the name is reserved`, true},
		{"machine add", []string{"--cluster", admin, "machine", "add", "m1", "--ca-key", caKey, "--out", filepath.Join(dir, "m1"), "--hosts", "127.0.0.1"}, "machine m1 added: its agent's certificate", false},
		{"machine add without --hosts", []string{"--cluster", admin, "machine", "add", "m2", "--ca-key", caKey, "--out", dir}, "--hosts: give the machine's underlay address", true},
		{"machine add as a tenant", []string{"--cluster", ctxFile("alice"), "machine", "add", "m3", "--ca-key", caKey, "--out", dir, "--hosts", "127.0.0.1"}, "permission denied", true},
		{"machine rm of no machine", []string{"--cluster", admin, "machine", "rm", "m9"}, "machine m9 has no agent's user", true},
		{"agent with another machine's certificate", []string{"agent", "--etcd", c.Endpoints[0], "--machine", "m2", "--cacert", c.Root.CA,
			"--cert", filepath.Join(dir, "m1", "agent-m1.crt"), "--key", filepath.Join(dir, "m1", "agent-m1.key")}, "is the certificate of agent:m1, not of machine m2's agent", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out, err := run(t, tc.args...)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v, more than 5 s", took)
			}
			got := out
			if tc.err {
				if err == nil {
					t.Fatalf("no error; output:\n%s", out)
				}
				got = err.Error()
			} else if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want it to contain %q", got, tc.want)
			}
			if strings.Contains(out, "/bob/") {
				t.Errorf("output shows bob's network:\n%s", out)
			}
		})
	}
	out, _ := run(t, "--cluster", admin, "tenant", "ls")
	if strings.Contains(out, "eve") || strings.Contains(out, "default") || !strings.Contains(out, "bob") {
		t.Errorf("tenant ls after the refused adds of eve and default:\n%s", out)
	}
}
