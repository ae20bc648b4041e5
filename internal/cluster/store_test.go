package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/cluster/pki"
)

// One 3-member cluster serves every test of the store; each test works under tenants of its own.
func TestStore(t *testing.T) {
	c := etcdtest.Start(t, 3)
	s := New(c.Client())
	for _, tc := range []struct {
		name string
		f    func(*testing.T, *Store)
	}{
		{"up and revisions", testUpRevisions},
		{"concurrent ups", testConcurrentUps},
		{"bad names", testBadNames},
		{"down", testDown},
		{"placements", testPlacements},
		{"machines", func(t *testing.T, s *Store) { testMachines(t, s, c) }},
		{"status", testStatus},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, s) })
	}
	t.Run("leader killed", func(t *testing.T) { testLeaderKilled(t, s, c) })
	t.Run("dial", func(t *testing.T) { testDial(t, c) })
}

// testLeaderKilled kills etcd's leader while ups of one network go on, one after another: none
// of them notices (an answer lost in the election is checked, not taken as a failure).
func testLeaderKilled(t *testing.T, s *Store, c *etcdtest.Cluster) {
	ctx := ctxT(t)
	leader := -1
	for i, ep := range c.Endpoints {
		st, err := s.cli.Status(ctx, ep)
		if err != nil {
			t.Fatal(err)
		}
		if st.Leader == st.Header.MemberId {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no member says it leads")
	}
	rev, err := s.Up(ctx, &Network{Tenant: "kill", Name: "lab", Source: "v0"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.Kill(leader)
	start := time.Now()
	for i := 1; i <= 20; i++ {
		if rev, err = s.Up(ctx, &Network{Tenant: "kill", Name: "lab", Source: fmt.Sprint("v", i)}, rev); err != nil {
			t.Fatalf("up %d, after the leader was killed: %v", i, err)
		}
	}
	t.Logf("20 ups, the first right after the leader was killed: %v", time.Since(start).Round(time.Millisecond))
	if got, err := s.Network(ctx, "kill", "lab"); err != nil || got.Source != "v20" || got.Revision != rev {
		t.Errorf("after the ups: %+v (%v), want v20 at revision %d", got, err, rev)
	}
	c.Restart(leader)
	if err := c.WaitHealthy(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testUpRevisions(t *testing.T, s *Store) {
	ctx := ctxT(t)
	n := &Network{Tenant: "rev", Name: "lab", File: "/x/lab.yaml", Source: "name: lab\n", Sources: map[string]string{"r1/bird.conf": "router id 1;\n"}}
	rev, err := s.Up(ctx, n, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Network(ctx, "rev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != rev || got.Source != n.Source || got.Sources["r1/bird.conf"] != "router id 1;\n" || got.Tenant != "rev" || got.Name != "lab" {
		t.Errorf("read back %+v, want revision %d and what was written", got, rev)
	}
	for _, tc := range []struct {
		name   string
		expect int64
		want   string // "" = success
	}{
		{"as read", rev, ""},
		{"stale revision", rev, "was changed by someone else meanwhile"}, // rev is stale after the first
		{"as if new", 0, "was created by someone else meanwhile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n.Source = "name: lab # " + tc.name + "\n"
			_, err := s.Up(ctx, n, tc.expect)
			if tc.want == "" && err != nil {
				t.Fatalf("up: %v", err)
			}
			if tc.want != "" && (!errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("up: %v, want ErrConflict saying %q", err, tc.want)
			}
		})
	}
	if got, _ := s.Network(ctx, "rev", "lab"); got == nil || got.Source != "name: lab # as read\n" {
		t.Errorf("after the conflicts the network is %+v, want the one up that won", got)
	}
	if _, err := s.Network(ctx, "rev", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Network of a missing network: %v, want ErrNotFound", err)
	}
}

// testConcurrentUps starts many ups of one network that all read the same revision: exactly
// one wins, the others get ErrConflict, and the stored network is the winner's.
func testConcurrentUps(t *testing.T, s *Store) {
	ctx := ctxT(t)
	existing := &Network{Tenant: "race", Name: "old", Source: "v0"}
	rev, err := s.Up(ctx, existing, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		net    string
		expect int64
	}{{"new network", "new", 0}, {"existing network", "old", rev}} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 8
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				wg.Go(func() {
					_, errs[i] = s.Up(ctx, &Network{Tenant: "race", Name: tc.net, Source: fmt.Sprint("v", i+1)}, tc.expect)
				})
			}
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner >= 0:
					t.Errorf("ups %d and %d both won", winner, i)
				case err == nil:
					winner = i
				case !errors.Is(err, ErrConflict):
					t.Errorf("up %d: %v, want ErrConflict", i, err)
				}
			}
			if winner < 0 {
				t.Fatal("no up won")
			}
			got, err := s.Network(ctx, "race", tc.net)
			if err != nil || got.Source != fmt.Sprint("v", winner+1) {
				t.Errorf("stored %+v (%v), want the winner's source v%d", got, err, winner+1)
			}
		})
	}
}

func testBadNames(t *testing.T, s *Store) {
	ctx := ctxT(t)
	for _, tc := range []struct{ tenant, net string }{
		{"", "lab"}, {"a/b", "lab"}, {"bad", "../x"}, {"bad", "la b"}, {"bad", strings.Repeat("x", 64)}, {"bad", "-lab"},
	} {
		if _, err := s.Up(ctx, &Network{Tenant: tc.tenant, Name: tc.net}, 0); !errors.Is(err, ErrBadName) {
			t.Errorf("up of tenant %q network %q: %v, want ErrBadName", tc.tenant, tc.net, err)
		}
	}
	if nets, _, err := s.Networks(ctx, "bad"); err != nil || len(nets) != 0 {
		t.Errorf("tenant bad has networks %v (%v), want none", nets, err)
	}
}

func testDown(t *testing.T, s *Store) {
	ctx := ctxT(t)
	n := &Network{Tenant: "down", Name: "lab", Source: "x"}
	rev, err := s.Up(ctx, n, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutPlacement(ctx, &Placement{Tenant: "down", Network: "lab", Generation: rev, Nodes: map[string]string{"a": "m1"}}, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Down(ctx, "down", "lab", rev-1); !errors.Is(err, ErrConflict) {
		t.Errorf("down at a stale revision: %v, want ErrConflict", err)
	}
	if err := s.Down(ctx, "down", "lab", rev); err != nil {
		t.Fatal(err)
	}
	p, err := s.Placement(ctx, "down", "lab")
	if err != nil {
		t.Fatalf("the placement after down (the placer drops it): %v", err)
	}
	_, seen, _ := s.Networks(ctx, "down")
	// Up again after the placer listed the networks: the placement is not dropped.
	rev2, err := s.Up(ctx, n, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DropPlacement(ctx, p, seen); !errors.Is(err, ErrConflict) {
		t.Errorf("dropping the placement of a network made again since the listing: %v, want ErrConflict", err)
	}
	if err := s.Down(ctx, "down", "lab", rev2); err != nil {
		t.Fatal(err)
	}
	_, seen, _ = s.Networks(ctx, "down")
	if err := s.DropPlacement(ctx, p, seen); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Placement(ctx, "down", "lab"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the placement after it was dropped: %v, want ErrNotFound", err)
	}
	if err := s.Down(ctx, "down", "lab", 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("down of a network that is gone: %v, want ErrNotFound", err)
	}
}

func testPlacements(t *testing.T, s *Store) {
	ctx := ctxT(t)
	_, from, err := s.Placements(ctx)
	if err != nil {
		t.Fatal(err)
	}
	events := s.WatchPlacements(ctx, from)
	rev, err := s.Up(ctx, &Network{Tenant: "pl", Name: "lab", Source: "x"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	m1 := Underlay{Address: netip.MustParseAddr("198.18.0.1"), MTU: 1500}
	p := &Placement{Tenant: "pl", Network: "lab", Generation: rev, Nodes: map[string]string{"a": "m1", "b": "m2"}, Machines: map[string]Underlay{"m1": m1}}
	prev, err := s.PutPlacement(ctx, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; ev.Err != nil || ev.Deleted || ev.Placement.Network != "lab" || ev.Placement.Nodes["b"] != "m2" || ev.Placement.Machines["m1"] != m1 {
		t.Errorf("watch saw %+v, want the placement of pl/lab", ev)
	}
	got, err := s.Placement(ctx, "pl", "lab")
	if err != nil || !got.OnMachine("m2") || got.OnMachine("m3") || got.Revision != prev {
		t.Errorf("Placement: %+v (%v)", got, err)
	}
	// The network changes: a placement made for the old generation is refused.
	if _, err := s.Up(ctx, &Network{Tenant: "pl", Name: "lab", Source: "y"}, rev); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutPlacement(ctx, p, prev); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "generation") {
		t.Errorf("placement for an old generation: %v, want ErrConflict naming the generation", err)
	}
	if err := s.Down(ctx, "pl", "lab", 0); err != nil {
		t.Fatal(err)
	}
	_, seen, _ := s.Networks(ctx, "pl")
	if err := s.DropPlacement(ctx, got, seen); err != nil {
		t.Fatal(err)
	}
	if ev := <-events; ev.Err != nil || !ev.Deleted || ev.Placement.Network != "lab" || ev.Placement.Tenant != "pl" {
		t.Errorf("watch saw %+v, want the placement of pl/lab deleted", ev)
	}
}

func testMachines(t *testing.T, s *Store, c *etcdtest.Cluster) {
	ctx := ctxT(t)
	m := &Machine{Name: "mt1", Address: netip.MustParseAddr("198.18.0.1"), MTU: 1500, Cores: 4, Memory: 8 << 30, Agent: "test"}
	reg, err := s.Register(ctx, m, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Register(ctx, &Machine{Name: "mt1"}, 5*time.Second); !errors.Is(err, ErrMachineTaken) || !strings.Contains(err.Error(), "agent test") {
		t.Errorf("second registration of mt1: %v, want ErrMachineTaken naming the agent", err)
	}
	// The same agent, restarted while its lease lives, takes the registration back.
	again, err := s.Register(ctx, &Machine{Name: "mt1", Agent: "test again", Lease: reg.Lease, Cores: 4, Memory: 8 << 30, Address: m.Address}, 5*time.Second)
	if err != nil {
		t.Fatalf("registration of mt1 with its own lease: %v", err)
	}
	if again.Lease != reg.Lease {
		t.Errorf("mt1 registered again under lease %x, want its own %x", again.Lease, reg.Lease)
	}
	again.cancel() // one keepalive is enough
	ms, _, err := s.Machines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := find(ms, "mt1"); got == nil || got.Cores != 4 || got.Memory != 8<<30 || got.Address != m.Address || got.Lease != reg.Lease {
		t.Errorf("Machines has mt1 as %+v, want what was registered", got)
	}
	if err := reg.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if ms, _, _ := s.Machines(ctx); find(ms, "mt1") != nil {
		t.Error("mt1 is registered after Close")
	}
	t.Run("lease expires", func(t *testing.T) { testLeaseExpiry(t, s, c) })
}

// testLeaseExpiry registers a machine through a client of its own, closes that client as a
// killed agent would stop renewing, and waits for the registration to go with the lease.
func testLeaseExpiry(t *testing.T, s *Store, c *etcdtest.Cluster) {
	ctx := ctxT(t)
	cli, err := c.NewClient(c.Root)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	if _, err := New(cli).Register(ctx, &Machine{Name: "mt2"}, ttl); err != nil {
		t.Fatal(err)
	}
	cli.Close()
	start := time.Now()
	for {
		ms, _, err := s.Machines(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if find(ms, "mt2") == nil {
			break
		}
		if time.Since(start) > 3*ttl {
			t.Fatalf("mt2 still registered %v after its agent stopped renewing a lease of %v", time.Since(start), ttl)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("registration gone %v after the agent stopped (lease %v)", time.Since(start).Round(10*time.Millisecond), ttl)
}

func find(ms []*Machine, name string) *Machine {
	for _, m := range ms {
		if m.Name == name {
			return m
		}
	}
	return nil
}

func testStatus(t *testing.T, s *Store) {
	ctx := ctxT(t)
	for _, m := range []string{"m2", "m1"} {
		if err := s.PutStatus(ctx, &Status{Tenant: "st", Network: "lab", Machine: m, Generation: 7, State: Converged, Nodes: 2}, 0); err != nil {
			t.Fatal(err)
		}
	}
	// A network whose name starts with the other's is not mixed in.
	if err := s.PutStatus(ctx, &Status{Tenant: "st", Network: "lab2", Machine: "m1", State: Failed}, 0); err != nil {
		t.Fatal(err)
	}
	sts, err := s.Statuses(ctx, "st", "lab")
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != 2 || sts[0].Machine != "m1" || sts[1].Machine != "m2" || sts[0].State != Converged || sts[0].Generation != 7 {
		t.Errorf("Statuses: %+v, want m1 and m2 converged at 7", sts)
	}
	if err := s.DeleteStatus(ctx, "st", "lab", "m1"); err != nil {
		t.Fatal(err)
	}
	if sts, _ := s.Statuses(ctx, "st", "lab"); len(sts) != 1 {
		t.Errorf("after DeleteStatus: %+v, want only m2", sts)
	}
}

// testDial checks that a cluster that does not answer, or certificate files that are wrong,
// give a clear error within 5 s.
func testDial(t *testing.T, c *etcdtest.Cluster) {
	closed := "https://127.0.0.1:1" // nothing listens on port 1
	dir := t.TempDir()
	other, _ := pki.NewCA("another CA", time.Hour)
	wrong, _ := other.Issue("root", pki.Client, nil, time.Hour)
	expired, _ := c.CA.Issue("root", pki.Client, nil, -time.Second)
	wrongFiles, expiredFiles := pki.Files{CA: c.Root.CA}, pki.Files{CA: c.Root.CA}
	wrongFiles.Cert, wrongFiles.Key, _ = wrong.Write(dir, "wrong")
	expiredFiles.Cert, expiredFiles.Key, _ = expired.Write(dir, "expired")
	for _, tc := range []struct {
		name string
		cfg  Config
		want error
		text string
	}{
		{"works", Config{Endpoints: c.Endpoints, TLS: c.Root}, nil, ""},
		{"no endpoints", Config{TLS: c.Root}, nil, "no etcd endpoints"},
		{"unreachable", Config{Endpoints: []string{closed}, TLS: c.Root}, ErrUnreachable, closed},
		{"no certificate", Config{Endpoints: c.Endpoints, TLS: pki.Files{CA: c.Root.CA}}, nil, "are all needed"},
		{"certificate of another CA", Config{Endpoints: c.Endpoints, TLS: wrongFiles}, ErrUnreachable, "does it trust this certificate?"},
		{"expired certificate", Config{Endpoints: c.Endpoints, TLS: expiredFiles}, nil, "expired.crt expired at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			s, err := Dial(context.Background(), tc.cfg)
			took := time.Since(start)
			if s != nil {
				s.Close()
			}
			if took > 5*time.Second {
				t.Errorf("Dial took %v, more than 5 s", took)
			}
			if tc.text == "" {
				if err != nil {
					t.Fatalf("Dial: %v", err)
				}
				return
			}
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("Dial: %v, want an error (%v) saying %q", err, tc.want, tc.text)
			}
		})
	}
}
