//go:build integration

package integration

// Tenants through an agent: etcd with authentication on, two tenants (etcd users of their own,
// client certificates of their names), an agent and placer running as the agents' user. Both
// tenants have a network lab with the same addresses on the same machine: both converge, each
// forwards, their kernel objects do not collide, and one tenant's down leaves the other's alone.

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/agent"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/cluster/pki"
)

// clientAs issues a client certificate of common name user (an etcd user) and returns its files.
func clientAs(t *testing.T, c *etcdtest.Cluster, user string) pki.Files {
	t.Helper()
	p, err := c.CA.Issue(user, pki.Client, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := pki.Files{CA: c.Root.CA}
	if f.Cert, f.Key, err = p.Write(t.TempDir(), user); err != nil {
		t.Fatal(err)
	}
	return f
}

// storeAs is a store of the cluster as user.
func storeAs(t *testing.T, c *etcdtest.Cluster, user string) *cluster.Store {
	t.Helper()
	cli, err := c.NewClient(clientAs(t, c, user))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cluster.New(cli)
}

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
	for _, tn := range tenants {
		if err := root.AddTenant(ctx, &cluster.Tenant{Name: tn, Quota: cluster.Quota{Nodes: 2}}); err != nil {
			t.Fatal(err)
		}
	}
	ag := startAgentAs(t, c, clientAs(t, c, cluster.AgentUser), e.state, "m1", "127.0.0.1", "--placer")
	src := strings.Replace(fmt.Sprintf(agentTopo, ""), "name: two", "name: lab", 1)
	stores := map[string]*cluster.Store{}
	for _, tn := range tenants {
		stores[tn] = storeAs(t, c, tn)
		gen, err := stores[tn].Up(ctx, &cluster.Network{Tenant: tn, Name: "lab", File: filepath.Join("/", tn, "lab.yaml"), Source: src}, 0)
		if err != nil {
			t.Fatalf("%s: up of lab: %v", tn, err)
		}
		took := waitConverged(t, root, ag, tn, "lab", "m1", gen)
		t.Logf("%s/lab converged %v after its up", tn, took.Round(time.Millisecond))
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
