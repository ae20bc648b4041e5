//go:build integration

package integration

// Tenants through an agent: etcd with authentication on, two tenants (etcd users of their own,
// client certificates of their names), an agent and placer running as the agents' user. Both
// tenants have a network lab with the same addresses on the same machine: both converge, each
// forwards, their kernel objects do not collide, and one tenant's down leaves the other's alone.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/agent"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/cluster/pki"
	"github.com/trellisnet/trellis/internal/spec"
)

// clientAs issues a client certificate of common name user (an etcd user) and returns its files.
func clientAs(t *testing.T, c *etcdtest.Cluster, user string) pki.Files {
	t.Helper()
	return certAs(t, c.CA, c.Root.CA, user, pki.Client, nil)
}

// certAs issues a certificate of ca for cn, with usage and hosts, and returns its files.
func certAs(t *testing.T, ca *pki.CA, caFile, cn string, usage pki.Usage, hosts []string) pki.Files {
	t.Helper()
	p, err := ca.Issue(cn, usage, hosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := pki.Files{CA: caFile}
	if f.Cert, f.Key, err = p.Write(t.TempDir(), cn); err != nil {
		t.Fatal(err)
	}
	return f
}

// tenantAs adds tenant name with quota q as root and returns the files of the certificate it
// was issued.
func tenantAs(t *testing.T, c *etcdtest.Cluster, root *cluster.Store, name string, q cluster.Quota) pki.Files {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := root.AddTenant(ctx, &cluster.Tenant{Name: name, Quota: q}, c.CA, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := pki.Files{CA: c.Root.CA}
	if f.Cert, f.Key, err = p.Write(t.TempDir(), name); err != nil {
		t.Fatal(err)
	}
	return f
}

// agentAs adds machine's agent as root (with the placers' role) and returns the files of its
// certificate, a server for 127.0.0.1 too, as trellis machine add issues it.
func agentAs(t *testing.T, c *etcdtest.Cluster, root *cluster.Store, machine string) pki.Files {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := root.AddAgent(ctx, machine, true); err != nil {
		t.Fatal(err)
	}
	return certAs(t, c.CA, c.Root.CA, cluster.AgentUser(machine), pki.Client|pki.Server, []string{"127.0.0.1"})
}

// storeWith is a store of the cluster with the certificate files f.
func storeWith(t *testing.T, c *etcdtest.Cluster, f pki.Files) *cluster.Store {
	t.Helper()
	cli, err := c.NewClient(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cluster.New(cli)
}

// agentEndpoint is the URL of the test's agent, as its placements give it.
var agentEndpoint string

func TestClusterTenants(t *testing.T) {
	e := start(t)
	tenants := []string{"alice", "bob"}
	for _, tn := range tenants {
		registerNetwork(agent.LocalName(tn, "lab"))
	}
	c := etcdtest.Start(t, 1)
	root := cluster.New(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	files := map[string]pki.Files{}
	for _, tn := range tenants {
		files[tn] = tenantAs(t, c, root, tn, cluster.Quota{Nodes: 2})
	}
	agentFiles := agentAs(t, c, root, "m1")
	ag := startAgentAs(t, c, agentFiles, e.state, "m1", "127.0.0.1", "--placer", "--listen", "127.0.0.1:0", "--counters", "500ms")
	src := strings.Replace(fmt.Sprintf(agentTopo, ""), "name: two", "name: lab", 1)
	stores := map[string]*cluster.Store{}
	for _, tn := range tenants {
		stores[tn] = storeWith(t, c, files[tn])
		before := revision(t, root)
		gen, err := stores[tn].Up(ctx, &cluster.Network{Tenant: tn, Name: "lab", File: filepath.Join("/", tn, "lab.yaml"), Source: src}, 0)
		if err != nil {
			t.Fatalf("%s: up of lab: %v", tn, err)
		}
		took := waitConverged(t, root, ag, tn, "lab", "m1", gen)
		if p, err := root.Placement(ctx, tn, "lab"); err == nil {
			agentEndpoint = p.Machines["m1"].Endpoint
		}
		// Each etcd write makes one revision: the network, its placement, the agent's report
		// (and a report of counters, if one fell in between).
		t.Logf("%s/lab converged %v after its up; etcd writes meanwhile: %d", tn, took.Round(time.Millisecond), revision(t, root)-before)
	}
	pids := map[string]map[string]int{}
	macs := map[string]string{}
	for _, tn := range tenants {
		local := agent.LocalName(tn, "lab")
		ping(t, e.state, local, "a", "10.0.0.2")
		info := inspect(t, e.state, local)
		pids[tn] = info.pids()
		for _, nd := range info.Nodes {
			for _, ifc := range nd.Interfaces {
				if other, ok := macs[ifc.MAC]; ok && ifc.MAC != "" {
					t.Errorf("%s's node %s %s has the MAC of an interface of %s's: %s", tn, nd.Name, ifc.Name, other, ifc.MAC)
				}
				macs[ifc.MAC] = tn
			}
		}
	}
	t.Run("default limits", func(t *testing.T) {
		// The file gives no memory and no pids: every tenant node has the cluster's defaults
		// all the same (docs/cluster.md, "Default limits"); before, no memory limit at all.
		for _, tn := range tenants {
			groups := procCgroups(t, pids[tn]["a"])
			want := map[string]string{"memory.max": strconv.Itoa(spec.ClusterMemory), "pids.max": "1024"}
			if _, v2 := groups[""]; !v2 {
				want = map[string]string{"memory.limit_in_bytes": strconv.Itoa(spec.ClusterMemory), "pids.max": "1024"}
			}
			for file, value := range want {
				if got := cgroupFile(t, groups, file); got != value {
					t.Errorf("%s's node a: %s = %q, want %q", tn, file, got, value)
				}
			}
		}
	})
	t.Run("VM images from the store", func(t *testing.T) { testImageStore(t, c, e.state, root, ag) })
	t.Run("exec and link through the agent", func(t *testing.T) { testRemote(t, c, agentFiles, files) })
	if err := stores["bob"].Down(ctx, "bob", "lab", 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "bob's lab gone from the machine", func() (bool, string) {
		nets := listNetworks(t, e.state)
		return len(nets) == 1 && nets[0] == agent.LocalName("alice", "lab"), fmt.Sprintf("networks %v\nagent log:\n%s", nets, ag.log)
	})
	ping(t, e.state, agent.LocalName("alice", "lab"), "a", "10.0.0.2")
	if got := inspect(t, e.state, agent.LocalName("alice", "lab")).pids(); !maps.Equal(got, pids["alice"]) {
		t.Errorf("alice's nodes restarted when bob's lab went: pids %v, before %v", got, pids["alice"])
	}
	if err := stores["alice"].Down(ctx, "alice", "lab", 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "alice's lab gone", func() (bool, string) {
		nets := listNetworks(t, e.state)
		return len(nets) == 0, fmt.Sprint(nets)
	})
	ag.kill()
	e.assertClean()
}

// testRemote runs exec and link through the agent with the CLI (--cluster) and directly, as the
// network's tenant and as others.
func testRemote(t *testing.T, c *etcdtest.Cluster, agentFiles pki.Files, files map[string]pki.Files) {
	dir := t.TempDir()
	ctxFile := func(name string, f pki.Files, tenant string) string {
		path := filepath.Join(dir, name+".yaml")
		data := fmt.Sprintf("etcd: [%s]\ncacert: %s\ncert: %s\nkey: %s\ntenant: %s\n", strings.Join(c.Endpoints, ", "), f.CA, f.Cert, f.Key, tenant)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ctxs := map[string]string{}
	tenants := slices.Sorted(maps.Keys(files))
	for _, tn := range tenants {
		ctxs[tn] = ctxFile(tn, files[tn], tn)
	}
	forged := ctxFile("forged", files["alice"], "bob") // alice's certificate, bob's tenant
	run := func(ctx string, args ...string) (string, error) {
		out, errOut, err := trellis(t, t.TempDir(), append([]string{"--cluster", ctx}, args...)...)
		return out + errOut, err
	}
	pingArgs := []string{"exec", "lab", "a", "--", "ping", "-c1", "-W1", "10.0.0.2"}
	for _, tn := range tenants {
		if out, err := run(ctxs[tn], pingArgs...); err != nil || !strings.Contains(out, "1 received") {
			t.Fatalf("%s: exec ping through the agent: %v\n%s", tn, err, out)
		}
	}
	// The pings are in the port counters the agent reports, as ls and inspect show them.
	waitFor(t, 5*time.Second, "alice's port counters through inspect --cluster", func() (bool, string) {
		out, err := run(ctxs["alice"], "inspect", "lab", "--json")
		var info struct {
			Machines []cluster.Status `json:"machines"`
		}
		if err != nil || json.Unmarshal([]byte(out), &info) != nil || len(info.Machines) != 1 {
			return false, fmt.Sprint(err, out)
		}
		ports := info.Machines[0].Ports
		return len(ports) == 2 && ports[0].TxPackets > 0 && ports[1].RxPackets > 0 && ports[0].Link == "ab", out
	})
	if out, err := run(ctxs["alice"], "ls"); err != nil || !regexp.MustCompile(`lab +up +\d+ +m1 \(2 nodes\) +[1-9]\d* pkts`).MatchString(out) {
		t.Errorf("ls --cluster: %v, want lab up with the packets its ports sent:\n%s", err, out)
	}
	if out, err := run(ctxs["alice"], "link", "lab", "ab", "down"); err != nil || !strings.Contains(out, "link ab of network lab is down on m1") {
		t.Fatalf("alice: link lab ab down: %v\n%s", err, out)
	}
	if out, err := run(ctxs["alice"], pingArgs...); err == nil {
		t.Errorf("alice's ping with her link down succeeded:\n%s", out)
	}
	if out, err := run(ctxs["bob"], pingArgs...); err != nil {
		t.Errorf("bob's ping failed when alice took her link down: %v\n%s", err, out)
	}
	if out, err := run(ctxs["alice"], "link", "lab", "ab", "up"); err != nil {
		t.Fatalf("alice: link lab ab up: %v\n%s", err, out)
	}
	waitFor(t, 5*time.Second, "alice's ping with her link up again", func() (bool, string) {
		out, err := run(ctxs["alice"], pingArgs...)
		return err == nil, out
	})

	otherCA, err := pki.NewCA("someone else's CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stranger := certAs(t, otherCA, c.Root.CA, "bob", pki.Client, nil) // bob's name, another CA
	exec := &agent.ExecRequest{Network: "lab", Node: "a", Argv: []string{"true"}}
	for _, tc := range []struct {
		name string
		do   func() (string, error)
		want string
	}{
		{"CLI: exec in bob's lab", func() (string, error) { return run(forged, pingArgs...) }, "permission denied"},
		{"CLI: link of bob's lab", func() (string, error) { return run(forged, "link", "lab", "ab", "down") }, "permission denied"},
		{"agent: alice names tenant bob", func() (string, error) {
			return direct(t, files["alice"], &agent.ExecRequest{Tenant: "bob", Network: "lab", Node: "a", Argv: []string{"true"}})
		}, "the certificate of tenant alice reaches only its own networks, not tenant bob's"},
		{"agent: alice guesses a network", func() (string, error) {
			return direct(t, files["alice"], &agent.ExecRequest{Network: "nope", Node: "a", Argv: []string{"true"}})
		}, "tenant alice has no network nope"},
		{"agent: alice names a node of no network", func() (string, error) {
			return direct(t, files["alice"], &agent.ExecRequest{Network: "lab", Node: "z", Argv: []string{"true"}})
		}, "has no node z on machine m1"},
		{"agent: an agent's certificate", func() (string, error) { return direct(t, agentFiles, exec) }, "the certificate of agent:m1 runs nothing in nodes"},
		{"agent: a certificate of another CA", func() (string, error) { return direct(t, stranger, exec) }, "certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out, err := tc.do()
			if err == nil || !strings.Contains(out+err.Error(), tc.want) {
				t.Errorf("got %v\n%s\nwant an error saying %q", err, out, tc.want)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v, more than 5 s", took)
			}
		})
	}
	if out, err := direct(t, files["bob"], exec); err != nil {
		t.Errorf("bob's own exec straight to the agent: %v\n%s", err, out)
	}
}

// direct sends an exec request straight to the agent on 127.0.0.1, found in the placement of
// the request's network, with the certificate files f.
func direct(t *testing.T, f pki.Files, req *agent.ExecRequest) (string, error) {
	t.Helper()
	tc, err := f.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := agent.NewClient(tc).Exec(ctx, agentEndpoint, req)
	if err != nil {
		return "", err
	}
	return res.Stdout + res.Stderr, nil
}

// revision is etcd's current revision: how many writes it has taken.
func revision(t *testing.T, s *cluster.Store) int64 {
	t.Helper()
	resp, err := s.Client().Get(context.Background(), cluster.PingKey)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// testImageStore: a tenant's VM names images of the machine's store; the agent refuses one that
// is not there and a qcow2 image whose backing file is a host file (here /dev/zero: it could as
// well be the machine's disk), reporting the field and the image and no host path, and starts
// nothing of the network.
func testImageStore(t *testing.T, c *etcdtest.Cluster, stateDir string, root *cluster.Store, ag *agentProc) {
	qemuImg, err := exec.LookPath("qemu-img")
	if err != nil {
		t.Fatal("qemu-img is needed to make a qcow2 image with a backing file: install qemu-utils (scripts/setup.sh does)")
	}
	store := filepath.Join(stateDir, spec.ImageStore)
	if err := os.MkdirAll(store, 0o755); err != nil {
		t.Fatal(err)
	}
	backed := filepath.Join(store, "backed.qcow2")
	if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", "-b", "/dev/zero", "-F", "raw", backed, "16M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const tn = "carol"
	registerNetwork(agent.LocalName(tn, "img"))
	tenantAs(t, c, root, tn, cluster.Quota{})
	src := "name: img\nnodes:\n  v: {kind: vm, vm: {disk: backed.qcow2}}\n  w: {kind: vm, vm: {disk: missing.qcow2}}\n"
	gen, err := root.Up(ctx, &cluster.Network{Tenant: tn, Name: "img", File: "/carol/img.yaml", Source: src}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var report string
	waitFor(t, 30*time.Second, "carol/img reported failed", func() (bool, string) {
		sts, err := root.Statuses(ctx, tn, "img")
		if err != nil {
			return false, err.Error()
		}
		for _, st := range sts {
			if st.Generation == gen && st.State == cluster.Failed {
				report = st.Error
				return true, ""
			}
		}
		return false, fmt.Sprintf("status %+v\nagent log:\n%s", sts, ag.log)
	})
	for _, want := range []string{`nodes.v.vm.disk: image "backed.qcow2": a qcow2 image with a backing file`, `nodes.w.vm.disk: image "missing.qcow2": not in this machine's image store`} {
		if !strings.Contains(report, want) {
			t.Errorf("report %q, want it to say %q", report, want)
		}
	}
	if strings.Contains(report, "/dev/") || strings.Contains(report, stateDir) {
		t.Errorf("report %q names a path of the machine", report)
	}
	if nets := listNetworks(t, stateDir); slices.Contains(nets, agent.LocalName(tn, "img")) {
		t.Errorf("networks %v: the refused network was created", nets)
	}
	if err := root.Down(ctx, tn, "img", 0); err != nil {
		t.Fatal(err)
	}
}
