package placer

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/agent"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/plan"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestPlacer runs two placers against a 3-member etcd with three registered machines: one leads
// and places new networks; a lost machine's nodes move to the others (a pinned node stays); a
// network that does not fit is refused naming the resource; when the leader stops, the other
// takes over.
func TestPlacer(t *testing.T) {
	c := etcdtest.Start(t, 3)
	s := cluster.New(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	regs := map[string]*cluster.Registration{}
	for i := 1; i <= 3; i++ {
		m := &cluster.Machine{Name: fmt.Sprintf("m%d", i), Address: netip.AddrFrom4([4]byte{198, 18, 0, byte(i)}), MTU: 1500, Cores: 4, Memory: 4 << 30}
		reg, err := s.Register(ctx, m, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		regs[m.Name] = reg
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	stops := map[string]context.CancelFunc{}
	for _, id := range []string{"p1", "p2"} {
		pctx, stop := context.WithCancel(ctx)
		stops[id] = stop
		done := make(chan struct{})
		go func() { Run(pctx, Config{Store: s, ID: id, Log: quiet}); close(done) }()
		t.Cleanup(func() { stop(); <-done })
	}

	up := func(name, src string) int64 {
		rev, err := s.Up(ctx, &cluster.Network{Tenant: "t", Name: name, File: "/t/" + name + ".yaml", Source: src}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	placedAs := func(tenant, name string, gen int64, cond func(*cluster.Placement) bool) *cluster.Placement {
		t.Helper()
		var last *cluster.Placement
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			p, err := s.Placement(ctx, tenant, name)
			if err == nil && p.Generation == gen && cond(p) {
				return p
			}
			last = p
		}
		t.Fatalf("placement of %s at generation %d: last %+v", name, gen, last)
		return nil
	}
	placed := func(name string, gen int64, cond func(*cluster.Placement) bool) *cluster.Placement {
		t.Helper()
		return placedAs("t", name, gen, cond)
	}

	gen := up("ring", "name: ring\nnodes:\n  a: {host: m2}\n  b: {}\n  c: {}\n  d: {}\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n  - endpoints: [b:eth2, c:eth1]\n  - endpoints: [c:eth2, d:eth1]\n")
	p := placed("ring", gen, func(p *cluster.Placement) bool { return len(p.Nodes) == 4 })
	if p.Nodes["a"] != "m2" || len(p.Machines) != 3 {
		t.Errorf("ring placed %v over %v, want a on m2 and all three machines used", p.Nodes, p.Machines)
	}
	if b, err := hex.DecodeString(p.Secret); err != nil || len(b) != 16 {
		t.Errorf("ring's tunnel secret %q, want 16 random bytes in hex", p.Secret)
	}

	t.Run("machine lost", func(t *testing.T) {
		var lost string
		for n, m := range p.Nodes {
			if n != "a" && m != "m2" {
				lost = m
			}
		}
		start := time.Now()
		if err := regs[lost].Close(ctx); err != nil {
			t.Fatal(err)
		}
		q := placed("ring", gen, func(q *cluster.Placement) bool {
			for _, m := range q.Nodes {
				if m == lost {
					return false
				}
			}
			return true
		})
		t.Logf("nodes of %s placed again %v after its registration went: %v -> %v", lost, time.Since(start).Round(time.Millisecond), p.Nodes, q.Nodes)
		for n, m := range p.Nodes {
			if m != lost && q.Nodes[n] != m {
				t.Errorf("node %s moved from %s to %s, though its machine is alive", n, m, q.Nodes[n])
			}
		}
		if q.Secret != p.Secret {
			t.Errorf("the tunnel secret changed from %q to %q when the network was placed again", p.Secret, q.Secret)
		}
	})

	t.Run("refused", func(t *testing.T) {
		gen := up("big", "name: big\nnodes:\n  a: {memory: 64G}\n")
		q := placed("big", gen, func(q *cluster.Placement) bool { return q.Refused != "" })
		if len(q.Nodes) != 0 || !strings.Contains(q.Refused, "memory") {
			t.Errorf("big: nodes %v, refused %q; want no nodes and memory named", q.Nodes, q.Refused)
		}
		if q.Secret == p.Secret || len(q.Secret) != 32 {
			t.Errorf("big's tunnel secret %q, ring's %q: want another random one", q.Secret, p.Secret)
		}
	})

	t.Run("over quota written past the CLI", func(t *testing.T) {
		if _, err := s.AddTenant(ctx, &cluster.Tenant{Name: "q", Quota: cluster.Quota{Nodes: 2}}, c.CA, time.Hour); err != nil {
			t.Fatal(err)
		}
		rev, err := s.Up(ctx, &cluster.Network{Tenant: "q", Name: "fits", File: "/t/fits.yaml", Source: "name: fits\nnodes:\n  a: {}\n  b: {}\n"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		placedAs("q", "fits", rev, func(q *cluster.Placement) bool { return len(q.Nodes) == 2 })
		// Straight into etcd, as a tenant's own client could: the store's check is passed by.
		resp, err := s.Client().Put(ctx, cluster.NetworkKey("q", "more"), `{"name":"more","file":"/t/more.yaml","source":"name: more\nnodes:\n  a: {}\n"}`)
		if err != nil {
			t.Fatal(err)
		}
		q := placedAs("q", "more", resp.Header.Revision, func(q *cluster.Placement) bool { return q.Refused != "" })
		if len(q.Nodes) != 0 || !strings.Contains(q.Refused, "nodes: 3, quota 2") {
			t.Errorf("more: nodes %v, refused %q; want no nodes and the quota named", q.Nodes, q.Refused)
		}
	})

	t.Run("tunnel keys", func(t *testing.T) {
		// Keys drawn from random secrets still meet by chance (24 bits of VXLAN id). Two
		// tenants' networks whose placements the test gives one secret, under which their
		// names derive keys of one VXLAN id, get keys of the cluster's own, different: the
		// first the one its secret derives (not the names' alone), the second another. A link
		// on one machine gets none; a network placed again keeps its keys.
		secret := []byte("0123456789abcdef")
		first, second := collidingKeys(t, secret)
		ms, _, err := s.Machines(ctx)
		if err != nil || len(ms) < 2 {
			t.Fatalf("machines %v: %v; want two", ms, err)
		}
		src := func(name, aHost string) string {
			return "name: " + name + "\nnodes:\n  a: {host: " + aHost + "}\n  b: {host: " + ms[1].Name + "}\n  c: {host: " + ms[1].Name + "}\n" +
				"links:\n  - {name: l, endpoints: [a:eth1, b:eth1]}\n  - {name: local, endpoints: [b:eth2, c:eth2]}\n"
		}
		up := func(tn, name, aHost string, expect int64) *cluster.Placement {
			rev, err := s.Up(ctx, &cluster.Network{Tenant: tn, Name: name, File: "/t/k.yaml", Source: src(name, aHost)}, expect)
			if err != nil {
				t.Fatal(err)
			}
			return placedAs(tn, name, rev, func(q *cluster.Placement) bool { return len(q.Nodes) == 3 })
		}
		var keys []uint32
		var gens []int64
		for _, pair := range [][2]string{first, second} {
			tn, name := pair[0], pair[1]
			q := up(tn, name, ms[1].Name, 0) // on one machine: no keys yet; its secret replaced
			q.Secret = hex.EncodeToString(secret)
			if _, err := s.PutPlacement(ctx, q, q.Revision); err != nil {
				t.Fatal(err)
			}
			q = up(tn, name, ms[0].Name, q.Generation)
			if _, ok := q.Keys["local"]; ok || q.Keys["l"]&0xffffff == 0 || q.Secret != hex.EncodeToString(secret) {
				t.Errorf("%s/%s: keys %v, secret %s; want one for l only, and the secret kept", tn, name, q.Keys, q.Secret)
			}
			keys = append(keys, q.Keys["l"])
			gens = append(gens, q.Generation)
		}
		if keys[0]&0xffffff == keys[1]&0xffffff {
			t.Errorf("keys %#x and %#x share a VXLAN id", keys[0], keys[1])
		}
		if derived := plan.TunnelKey(secret, agent.LocalName(first[0], first[1]), "l"); keys[0] != derived ||
			keys[0] == plan.TunnelKey(nil, agent.LocalName(first[0], first[1]), "l") {
			t.Errorf("the first network's key %#x, want %#x, the one its secret derives", keys[0], derived)
		}
		if q := up(second[0], second[1], ms[0].Name, gens[1]); q.Keys["l"] != keys[1] {
			t.Errorf("%s/%s placed again: key %#x, want %#x kept", second[0], second[1], q.Keys["l"], keys[1])
		}
	})

	t.Run("real-time priority written past the CLI", func(t *testing.T) {
		// Tenant q's quota grants no real-time scheduling; written straight into etcd, a VM
		// with SCHED_FIFO priority is refused with the field and the grant named.
		src := "name: rt\nnodes:\n  a: {kind: vm, vm: {priority: {vcpu: 99}}}\n"
		data, _ := json.Marshal(map[string]string{"name": "rt", "file": "/t/rt.yaml", "source": src})
		resp, err := s.Client().Put(ctx, cluster.NetworkKey("q", "rt"), string(data))
		if err != nil {
			t.Fatal(err)
		}
		q := placedAs("q", "rt", resp.Header.Revision, func(q *cluster.Placement) bool { return q.Refused != "" })
		if len(q.Nodes) != 0 || !strings.Contains(q.Refused, "node a: vm.priority needs the quota's realtime grant") {
			t.Errorf("rt: nodes %v, refused %q; want no nodes and the grant named", q.Nodes, q.Refused)
		}
	})

	t.Run("agent back with another endpoint", func(t *testing.T) {
		m := &cluster.Machine{Address: netip.AddrFrom4([4]byte{198, 18, 0, 2}), MTU: 1500, Cores: 4, Memory: 4 << 30, Endpoint: "https://198.18.0.2:7446"}
		data, _ := json.Marshal(m)
		if _, err := s.Client().Put(ctx, cluster.MachineKey("m2"), string(data), clientv3.WithLease(regs["m2"].Lease)); err != nil {
			t.Fatal(err)
		}
		before, _ := s.Placement(ctx, "t", "ring")
		q := placed("ring", gen, func(q *cluster.Placement) bool { return q.Machines["m2"].Endpoint == m.Endpoint })
		if !maps.Equal(q.Nodes, before.Nodes) {
			t.Errorf("nodes moved: %v -> %v", before.Nodes, q.Nodes)
		}
	})

	t.Run("down drops the placement", func(t *testing.T) {
		if err := s.Down(ctx, "t", "ring", 0); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			_, err := s.Placement(ctx, "t", "ring")
			if errors.Is(err, cluster.ErrNotFound) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("placement of ring after its down: %v, want it dropped", err)
			}
		}
	})

	t.Run("leader stops", func(t *testing.T) {
		resp, err := s.Client().Get(ctx, cluster.ElectionPrefix+"placer", clientv3.WithFirstCreate()...)
		if err != nil || len(resp.Kvs) == 0 {
			t.Fatalf("no leader key: %v", err)
		}
		leader := string(resp.Kvs[0].Value)
		stops[leader]()
		start := time.Now()
		gen := up("later", "name: later\nnodes:\n  a: {}\n")
		placed("later", gen, func(q *cluster.Placement) bool { return len(q.Nodes) == 1 })
		t.Logf("leader %s stopped; the other placed a new network %v later", leader, time.Since(start).Round(time.Millisecond))
	})
}

// collidingKeys finds two (tenant, network) pairs whose link "l" derives, under secret, tunnel
// keys of one VXLAN id on the machines (24 bits: a few thousand names on average).
func collidingKeys(t *testing.T, secret []byte) ([2]string, [2]string) {
	seen := map[uint32][2]string{}
	for i := 0; i < 1<<22; i++ {
		tn, name := fmt.Sprintf("k%d", i%2), fmt.Sprintf("n%d", i)
		vni := plan.TunnelKey(secret, agent.LocalName(tn, name), "l") & 0xffffff
		if other, ok := seen[vni]; ok && other[0] != tn {
			return other, [2]string{tn, name}
		}
		seen[vni] = [2]string{tn, name}
	}
	t.Fatal("no two names with one derived VXLAN id in 4 million")
	return [2]string{}, [2]string{}
}

// TestPassBatches writes 100 networks before a placer starts: its first pass places them all in
// two transactions (63 placements each at most), not one per network.
func TestPassBatches(t *testing.T) {
	c := etcdtest.Start(t, 1)
	s := cluster.New(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	register(ctx, t, s, 3, 5*time.Second)
	const n = 100
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		src := "name: " + name + "\nnodes:\n  a: {}\n  b: {}\nlinks:\n  - endpoints: [a:eth1, b:eth1]\n"
		if _, err := s.Up(ctx, &cluster.Network{Tenant: "t", Name: name, File: "/t/" + name + ".yaml", Source: src}, 0); err != nil {
			t.Fatal(err)
		}
	}
	start(ctx, t, s, "p1", &syncBuffer{}, nil)
	revs := map[int64]bool{}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		places, _, err := s.Placements(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(places) == n {
			for _, p := range places {
				revs[p.Revision] = true
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d networks placed after 20s", len(places), n)
		}
	}
	if len(revs) > 2 {
		t.Errorf("%d networks placed in %d transactions, want 2", n, len(revs))
	}
}

func TestSessionSeconds(t *testing.T) {
	tests := []struct {
		ttl  time.Duration
		want int
	}{
		{0, 5},
		{3 * time.Second, 3},
		{2500 * time.Millisecond, 3},
		{100 * time.Millisecond, 1},
	}
	for _, tt := range tests {
		if got := (Config{SessionTTL: tt.ttl}).sessionSeconds(); got != tt.want {
			t.Errorf("SessionTTL %v: %d s, want %d", tt.ttl, got, tt.want)
		}
	}
}
