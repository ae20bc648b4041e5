package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/cluster/pki"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// tenantNet is a network of n nodes, each needing cpu cores and mem of memory.
func tenantNet(tenant, name string, n int, cpu float64, mem string) *Network {
	src := "name: " + name + "\nnodes:\n"
	for i := range n {
		src += fmt.Sprintf("  n%d: {cpu: %g, memory: %s}\n", i, cpu, mem)
	}
	return &Network{Tenant: tenant, Name: name, File: "/t/" + name + ".yaml", Source: src}
}

// storeOf is a store of the cluster with the certificate pair p.
func storeOf(t *testing.T, c *etcdtest.Cluster, p *pki.Pair) *Store {
	t.Helper()
	return filesStore(t, c, pairFiles(t, c, p))
}

// pairFiles writes pair p and returns its files, with the cluster's CA.
func pairFiles(t *testing.T, c *etcdtest.Cluster, p *pki.Pair) pki.Files {
	t.Helper()
	f := pki.Files{CA: c.Root.CA}
	var err error
	if f.Cert, f.Key, err = p.Write(t.TempDir(), "client"); err != nil {
		t.Fatal(err)
	}
	return f
}

// filesStore is a store of the cluster with the certificate files f.
func filesStore(t *testing.T, c *etcdtest.Cluster, f pki.Files) *Store {
	t.Helper()
	cli, err := c.NewClient(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return New(cli)
}

// clientStore is a store as the etcd user cn, with a client certificate of the CA for it.
func clientStore(t *testing.T, c *etcdtest.Cluster, cn string) *Store {
	t.Helper()
	p, err := c.CA.Issue(cn, pki.Client, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return storeOf(t, c, p)
}

// tenantFiles adds tenant tn as root and returns the files of the certificate it was issued.
func tenantFiles(t *testing.T, c *etcdtest.Cluster, root *Store, tn *Tenant) pki.Files {
	t.Helper()
	p, err := root.AddTenant(ctxT(t), tn, c.CA, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return pairFiles(t, c, p)
}

// addTenant adds tenant tn as root and returns a store with the certificate it was issued.
func addTenant(t *testing.T, c *etcdtest.Cluster, root *Store, tn *Tenant) *Store {
	t.Helper()
	return filesStore(t, c, tenantFiles(t, c, root, tn))
}

// TestTenants makes tenants in an etcd with authentication on, and checks that one cannot
// list, read, watch, change or guess its way into another's records through etcd directly,
// that two tenants may have a network of one name, and that quotas hold in the up transaction.
func TestTenants(t *testing.T) {
	c := etcdtest.Start(t, 1)
	root := New(c.Client())
	ctx := ctxT(t)
	alice := addTenant(t, c, root, &Tenant{Name: "alice", Quota: Quota{Nodes: 4, CPUs: 3, Memory: 96 << 20}})
	a2 := addTenant(t, c, root, &Tenant{Name: "alice2"})
	bob := addTenant(t, c, root, &Tenant{Name: "bob"})
	if _, err := root.AddTenant(ctx, &Tenant{Name: "bob"}, c.CA, time.Hour); !errors.Is(err, ErrTenantExists) {
		t.Errorf("adding bob again: %v, want ErrTenantExists", err)
	}
	for _, name := range []string{"a/b", "tenant:x"} {
		if _, err := root.AddTenant(ctx, &Tenant{Name: name}, c.CA, time.Hour); !errors.Is(err, ErrBadName) {
			t.Errorf("adding tenant %q: %v, want ErrBadName", name, err)
		}
	}
	for _, s := range []*Store{alice, bob} {
		n := tenantNet(map[*Store]string{alice: "alice", bob: "bob"}[s], "lab", 1, 1, "8M")
		if _, err := s.Up(ctx, n, 0); err != nil {
			t.Fatalf("tenant %s: up of its own lab: %v", n.Tenant, err)
		}
	}
	if _, err := root.Up(ctx, tenantNet("alice2", "lab", 1, 1, "8M"), 0); err != nil {
		t.Fatal(err)
	}
	t.Run("isolation", func(t *testing.T) { testIsolation(t, alice, bob) })
	t.Run("junk under its own prefix", func(t *testing.T) {
		// A tenant's client may write anything under its prefix; the placer's and agents'
		// listing leaves out what Up cannot have written, so junk stops nobody else's network.
		for _, key := range []string{NetworkKey("alice", "lab/x"), NetworkKey("alice", "x.y"), NetworkKey("alice", "junk")} {
			if _, err := alice.Client().Put(ctx, key, "not a network"); err != nil {
				t.Fatal(err)
			}
			defer alice.Client().Delete(context.WithoutCancel(ctx), key)
		}
		nets, _, err := root.Networks(ctx, "")
		var got []string
		for _, n := range nets {
			got = append(got, n.Tenant+"/"+n.Name)
		}
		if err != nil || strings.Join(got, " ") != "alice/lab alice2/lab bob/lab" {
			t.Errorf("every network: %v, %v; want alice/lab alice2/lab bob/lab", got, err)
		}
	})
	t.Run("quota", func(t *testing.T) { testQuota(t, root, alice) })
	t.Run("agent", func(t *testing.T) {
		if err := root.AddAgent(ctx, "m1", true); err != nil {
			t.Fatal(err)
		}
		testAgentUser(t, clientStore(t, c, AgentUser("m1")))
	})
	t.Run("removed", func(t *testing.T) {
		if err := root.RemoveTenant(ctx, "alice2"); err == nil {
			t.Fatal("removing a tenant with a network: no error")
		}
		if err := root.Down(ctx, "alice2", "lab", 0); err != nil {
			t.Fatal(err)
		}
		if err := root.RemoveTenant(ctx, "alice2"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := a2.Networks(ctx, "alice2"); !errors.Is(err, ErrDenied) {
			t.Errorf("a removed tenant lists its networks: %v, want ErrDenied", err)
		}
		if _, err := root.Tenant(ctx, "alice2"); !errors.Is(err, ErrNotFound) {
			t.Errorf("removed tenant's record: %v, want ErrNotFound", err)
		}
		// Added again, the tenant has a new user: the old certificate stays refused.
		addTenant(t, c, root, &Tenant{Name: "alice2"})
		if _, _, err := a2.Networks(ctx, "alice2"); !errors.Is(err, ErrDenied) {
			t.Errorf("a re-added tenant's old certificate lists its networks: %v, want ErrDenied", err)
		}
	})
}

// testIsolation tries, as alice, everything that would reach bob's (or alice2's) records.
func testIsolation(t *testing.T, alice, bob *Store) {
	ctx := ctxT(t)
	cli := alice.Client()
	pfx := clientv3.WithPrefix()
	get := func(key string, opts ...clientv3.OpOption) error { _, err := cli.Get(ctx, key, opts...); return err }
	put := func(key string) error { _, err := cli.Put(ctx, key, "{}"); return err }
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"get bob's network", func() error { return get(NetworkKey("bob", "lab")) }},
		{"list bob's networks", func() error { return get(TenantPrefix(NetworksPrefix, "bob"), pfx) }},
		{"list every network", func() error { return get(NetworksPrefix, pfx) }},
		{"list networks/alice without the slash (covers alice2)", func() error { return get(NetworksPrefix+"alice", pfx) }},
		{"get alice2's network", func() error { return get(NetworkKey("alice2", "lab")) }},
		{"get bob's placement", func() error { return get(PlacementKey("bob", "lab")) }},
		{"get bob's status", func() error { return get(TenantPrefix(StatusPrefix, "bob"), pfx) }},
		{"get bob's quota", func() error { return get(TenantKey("bob")) }},
		{"list tenants", func() error { return get(TenantsPrefix, pfx) }},
		{"list machines", func() error { return get(MachinesPrefix, pfx) }},
		{"put bob's network", func() error { return put(NetworkKey("bob", "lab")) }},
		{"put a network under alice2", func() error { return put(NetworkKey("alice2", "x")) }},
		{"delete bob's network", func() error { _, err := cli.Delete(ctx, NetworkKey("bob", "lab")); return err }},
		{"delete every network", func() error { _, err := cli.Delete(ctx, NetworksPrefix, pfx); return err }},
		{"raise its own quota", func() error { return put(TenantKey("alice")) }},
		{"place its own network", func() error { return put(PlacementKey("alice", "lab")) }},
		{"forge its own status", func() error { return put(StatusKey("alice", "lab", "m1")) }},
		{"register a machine", func() error { return put(MachineKey("m9")) }},
		{"compare bob's network in a transaction", func() error {
			_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(NetworkKey("bob", "lab")), ">", 0)).Then(clientv3.OpGet(NetworkKey("alice", "lab"))).Commit()
			return err
		}},
		{"watch bob's networks", func() error { return watchErr(ctx, cli, TenantPrefix(NetworksPrefix, "bob")) }},
		{"watch every placement", func() error { return watchErr(ctx, cli, PlacementsPrefix) }},
		{"store: read bob's lab", func() error { _, err := alice.Network(ctx, "bob", "lab"); return err }},
		{"store: list bob's networks", func() error { _, _, err := alice.Networks(ctx, "bob"); return err }},
		{"store: up bob's lab", func() error { _, err := alice.Up(ctx, tenantNet("bob", "lab", 1, 1, "8M"), 0); return err }},
		{"store: down bob's lab", func() error { return alice.Down(ctx, "bob", "lab", 0) }},
		{"store: bob's statuses", func() error { _, err := alice.Statuses(ctx, "bob", "lab"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if !isDenied(err) {
				t.Errorf("got %v, want permission denied", err)
			}
		})
	}
	if n, err := bob.Network(ctx, "bob", "lab"); err != nil || n.Tenant != "bob" {
		t.Errorf("bob's lab after alice's tries: %v, %v", n, err)
	}
	if nets, _, err := alice.Networks(ctx, "alice"); err != nil || len(nets) != 1 || nets[0].Name != "lab" {
		t.Errorf("alice's own networks: %v, %v; want her lab", nets, err)
	}
}

// isDenied tells whether err is etcd's permission denied: the store's ErrDenied, the client's
// rpctypes error, or the text a cancelled watch carries.
func isDenied(err error) bool {
	return errors.Is(err, ErrDenied) || errors.Is(err, rpctypes.ErrPermissionDenied) ||
		(err != nil && strings.HasSuffix(err.Error(), rpctypes.ErrPermissionDenied.Error()))
}

// watchErr opens a watch of prefix and returns the error it ends with (nil if it delivers
// events or stays open for a second).
func watchErr(ctx context.Context, cli *clientv3.Client, prefix string) error {
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for wr := range cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(1)) {
		if err := wr.Err(); err != nil {
			return err
		}
		if len(wr.Events) > 0 {
			return fmt.Errorf("watch delivered %d events", len(wr.Events))
		}
	}
	return nil
}

// testQuota checks alice's quota (4 nodes, 3 cpus, 96M; her lab takes 1, 1, 8M) in the up
// transaction: each limit refuses an up that goes over and nothing is written; a network
// changed in place counts once; two ups that each fit alone cannot both win.
func testQuota(t *testing.T, root, alice *Store) {
	ctx := ctxT(t)
	for _, tc := range []struct {
		name string
		n    *Network
		want string // "" fits
	}{
		{"nodes", tenantNet("alice", "big", 4, 0.25, "8M"), "nodes: 5, quota 4"},
		{"cpus", tenantNet("alice", "big", 2, 1.5, "8M"), "cpus: 4, quota 3"},
		{"memory", tenantNet("alice", "big", 2, 0.25, "48M"), "memory: 109051904 bytes, quota 100663296"},
		{"lab changed in place counts once", tenantNet("alice", "lab", 4, 0.5, "8M"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var expect int64
			if cur, err := alice.Network(ctx, "alice", tc.n.Name); err == nil {
				expect = cur.Revision
			}
			_, err := alice.Up(ctx, tc.n, expect)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrOverQuota) || !strings.Contains(fmt.Sprint(err), tc.want) {
				t.Fatalf("up: %v, want ErrOverQuota with %q", err, tc.want)
			}
			if _, err := alice.Network(ctx, "alice", tc.n.Name); !errors.Is(err, ErrNotFound) {
				t.Errorf("network %s after a refused up: %v, want ErrNotFound", tc.n.Name, err)
			}
		})
	}
	// lab now takes all 4 nodes; a lower quota refuses even a network of one more node.
	if err := root.SetQuota(ctx, "alice", Quota{Nodes: 6}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = alice.Up(ctx, tenantNet("alice", fmt.Sprintf("race%d", i), 2, 0.1, "8M"), 0)
		}()
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("two ups of 2 nodes each with 2 nodes left: %v, %v; want exactly one to win", errs[0], errs[1])
	}
	lost := errs[0]
	if lost == nil {
		lost = errs[1]
	}
	if !errors.Is(lost, ErrOverQuota) {
		t.Errorf("the up that lost: %v, want ErrOverQuota", lost)
	}
	if use, _, err := alice.Usage(ctx, "alice", ""); err != nil || use.Nodes != 6 {
		t.Errorf("alice's use after the race: %+v, %v; want 6 nodes", use, err)
	}
}

// testAgentUser checks that an agent's user with the placers' role may do an agent's and a
// placer's work under authentication, and may not change a tenant's network.
func testAgentUser(t *testing.T, s *Store) {
	ctx := ctxT(t)
	if nets, _, err := s.Networks(ctx, ""); err != nil || len(nets) < 3 {
		t.Errorf("agent lists every network: %d, %v", len(nets), err)
	}
	if _, err := s.Tenants(ctx); err != nil {
		t.Errorf("agent lists the tenants' quotas: %v", err)
	}
	reg, err := s.Register(ctx, &Machine{Name: "m1", Cores: 2}, 2*time.Second)
	if err != nil {
		t.Fatalf("agent registers a machine: %v", err)
	}
	defer reg.Close(context.WithoutCancel(ctx))
	n, err := s.Network(ctx, "bob", "lab")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutPlacement(ctx, &Placement{Tenant: "bob", Network: "lab", Generation: n.Revision, Nodes: map[string]string{"n0": "m1"}}, 0); err != nil {
		t.Errorf("agent (placer) writes a placement: %v", err)
	}
	if err := s.PutStatus(ctx, &Status{Tenant: "bob", Network: "lab", Machine: "m1", State: Converged}, reg.Lease); err != nil {
		t.Errorf("agent writes a status: %v", err)
	}
	if _, err := s.Up(ctx, tenantNet("bob", "lab", 1, 1, "8M"), n.Revision); !isDenied(err) {
		t.Errorf("agent changes bob's network: %v, want permission denied", err)
	}
}
