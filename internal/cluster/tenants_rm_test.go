package cluster

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestRemoveTenantRacesUp runs `tenant rm` and the tenant's `up` at once, round after round,
// the up started a little later each round so that it lands at every step of the removal. In
// every round exactly one wins: either the tenant is gone with no network left under its
// prefix, or the removal is refused and the tenant keeps its record and its network. Before,
// an up that committed between the removal's check for networks and its deletes left a network
// of a tenant that no longer existed.
func TestRemoveTenantRacesUp(t *testing.T) {
	c := etcdtest.Start(t, 1)
	root := New(c.Client())
	ctx := ctxT(t)
	const rounds = 24
	removed := 0
	for i := range rounds {
		name := fmt.Sprintf("race%d", i)
		tenant := addTenant(t, c, root, &Tenant{Name: name, Quota: Quota{Nodes: 10}})
		if _, err := tenant.Tenant(ctx, name); err != nil { // connected before the race
			t.Fatal(err)
		}
		var upErr, rmErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i%8) * time.Millisecond)
			_, upErr = tenant.Up(ctx, tenantNet(name, "lab", 1, 1, "8M"), 0)
		}()
		go func() { defer wg.Done(); rmErr = root.RemoveTenant(ctx, name) }()
		wg.Wait()
		nets, err := root.cli.Get(ctx, TenantPrefix(NetworksPrefix, name), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		_, terr := root.Tenant(ctx, name)
		switch {
		case rmErr == nil && (nets.Count > 0 || terr == nil):
			t.Errorf("round %d: tenant %s removed, but %d networks (up: %v) and its record (%v) are left", i, name, nets.Count, upErr, terr)
		case rmErr != nil && (upErr != nil || nets.Count != 1 || terr != nil):
			t.Errorf("round %d: removal refused (%v), but up: %v, networks %d, record: %v", i, rmErr, upErr, nets.Count, terr)
		case rmErr == nil:
			removed++
		}
	}
	t.Logf("%d of %d rounds removed the tenant, the others kept it with its network", removed, rounds)
}
