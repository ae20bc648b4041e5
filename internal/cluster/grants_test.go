package cluster

import (
	"errors"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/spec"
)

// TestTenantLimits: a tenant's node that gives no memory or pids counts the defaults every
// cluster node gets (256M for a container, 512M for a VM, 1024 processes) against its quota,
// and real-time scheduling and cores are refused unless the quota grants them. Each refused up
// names the node, field and grant or limit, and writes nothing. Before, nodes without `memory:`
// counted nothing (and ran without a memory limit), and a tenant's VM could run SCHED_FIFO 99.
func TestTenantLimits(t *testing.T) {
	c := etcdtest.Start(t, 1)
	root := New(c.Client())
	ctx := ctxT(t)
	carol := addTenant(t, c, root, &Tenant{Name: "carol", Quota: Quota{Memory: 700 << 20, Pids: 3000}})
	net := func(name, nodes string) *Network {
		return &Network{Tenant: "carol", Name: name, File: "/t/" + name + ".yaml", Source: "name: " + name + "\nnodes:\n" + nodes}
	}
	rows := []struct {
		name, nodes string
		err         error
		want        string
	}{
		{"three containers without memory", "  a: {}\n  b: {}\n  c: {}\n", ErrOverQuota, "memory: 805306368 bytes, quota 734003200"},
		{"two VMs without memory", "  a: {kind: vm}\n  b: {kind: vm}\n", ErrOverQuota, "memory: 1073741824 bytes, quota 734003200"},
		{"processes", "  a: {memory: 8M}\n  b: {memory: 8M}\n  c: {memory: 8M}\n", ErrOverQuota, "pids: 3072, quota 3000"},
		{"vm.priority", "  a: {kind: vm, vm: {priority: {vcpu: 99}}}\n", ErrNotGranted, "node a: vm.priority needs the quota's realtime grant"},
		{"vm.priority of io", "  a: {kind: vm, vm: {priority: {io: 50}}}\n", ErrNotGranted, "node a: vm.priority needs the quota's realtime grant"},
		{"vm.reserve", "  a: {kind: vm, vm: {reserve: 50%}}\n", ErrNotGranted, "node a: vm.reserve needs the quota's realtime grant"},
		{"vm.pin", "  a: {kind: vm, vm: {pin: {vcpu: [0]}}}\n", ErrNotGranted, "node a: vm.pin needs the quota's pin grant"},
		{"cpuset", "  a: {cpuset: \"0\"}\n", ErrNotGranted, "node a: cpuset needs the quota's pin grant"},
		{"engine cpus", "  a: {engines: [{cpus: 0}]}\n", ErrNotGranted, "node a: engines[0].cpus needs the quota's pin grant"},
		{"fits", "  a: {}\n  b: {memory: 64M, pids: 900}\n", nil, ""},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			_, err := carol.Up(ctx, net("n", r.nodes), 0)
			if r.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				if err := carol.Down(ctx, "carol", "n", 0); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, r.err) || !strings.Contains(err.Error(), r.want) || !strings.Contains(err.Error(), "nothing was changed") {
				t.Fatalf("up: %v, want %v saying %q and that nothing was changed", err, r.err, r.want)
			}
			if _, err := carol.Network(ctx, "carol", "n"); !errors.Is(err, ErrNotFound) {
				t.Errorf("network after a refused up: %v, want ErrNotFound", err)
			}
		})
	}
	if use := UsageOf(mustSpec(t, net("u", "  a: {}\n  b: {kind: vm}\n  c: {memory: 64M, pids: 100}\n"))); use != (Quota{Nodes: 3, Memory: (256 + 512 + 64) << 20, Pids: 2148}) {
		t.Errorf("usage %+v, want the defaults counted", use)
	}
	// Granted by the administrator, the same settings are taken.
	if err := root.SetQuota(ctx, "carol", Quota{Realtime: true, Pin: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.Up(ctx, net("rt", "  a: {kind: vm, vm: {priority: {io: 99}, pin: {vcpu: [0]}, reserve: 50%}}\n  b: {cpuset: \"0\", engines: [{cpus: 0}]}\n"), 0); err != nil {
		t.Errorf("up with realtime and pin granted: %v", err)
	}
}

func mustSpec(t *testing.T, n *Network) *spec.Network {
	t.Helper()
	sn, err := n.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return sn
}
