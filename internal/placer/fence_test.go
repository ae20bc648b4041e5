package placer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestFencedWrite stops a leader between computing a placement and writing it, and takes its
// leadership away meanwhile (its session revoked, as when it expires, or its election key
// deleted): its write is refused, it says so in its log, and the other placer, leading now,
// writes the placement.
func TestFencedWrite(t *testing.T) {
	c := etcdtest.Start(t, 1)
	admin := cluster.New(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	register(ctx, t, admin, 1, time.Minute)
	for i, tc := range []struct {
		name string
		lose func(ctx context.Context, cli *clientv3.Client, key string, lease clientv3.LeaseID) error
	}{
		{"session revoked", func(ctx context.Context, cli *clientv3.Client, _ string, lease clientv3.LeaseID) error {
			_, err := cli.Revoke(ctx, lease)
			return err
		}},
		{"election key deleted", func(ctx context.Context, cli *clientv3.Client, key string, _ clientv3.LeaseID) error {
			_, err := cli.Delete(ctx, key)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &syncBuffer{}
			network := fmt.Sprintf("n%d", i)
			computed, proceed := make(chan struct{}), make(chan struct{})
			release := sync.OnceFunc(func() { close(proceed) })
			var once sync.Once
			hold := func(_, n string) {
				if n == network {
					once.Do(func() { close(computed); <-proceed })
				}
			}
			start(ctx, t, cluster.New(c.Client()), "p1", logs, hold)
			t.Cleanup(release) // before p1 stops, if the test ends early
			leader := waitLeader(ctx, t, admin, "p1")
			start(ctx, t, cluster.New(c.Client()), "p2", logs, nil)
			gen, err := writeNetwork(ctx, admin, network, "")
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-computed:
			case <-ctx.Done():
				t.Fatalf("p1 never got to writing %s\n%s", network, logs)
			}
			if err := tc.lose(ctx, admin.Client(), string(leader.Key), clientv3.LeaseID(leader.Lease)); err != nil {
				t.Fatal(err)
			}
			release()
			next := waitLeader(ctx, t, admin, "p2")
			var p *cluster.Placement
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				var err error
				p, err = admin.Placement(ctx, "t", network)
				if err == nil && p.Generation == gen && p.Term == next.Created {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no placement of %s by p2 (term %d; p1's was %d): last %+v, %v\n%s", network, next.Created, leader.Created, p, err, logs)
				}
			}
			for _, w := range writes(ctx, t, admin.Client(), cluster.PlacementKey("t", network)) {
				if w.Term != next.Created {
					t.Errorf("placement of %s written at revision %d in term %d, not p2's %d (p1's: %d, which it had lost)\n%s", network, w.Revision, w.Term, next.Created, leader.Created, logs)
				}
			}
			if !strings.Contains(logs.String(), `msg="lost leadership: stopped writing" placer=p1`) {
				t.Errorf("p1 did not log that it lost its leadership:\n%s", logs)
			}
		})
	}
}

// register registers machines m1..mN with a lease of ttl.
func register(ctx context.Context, t *testing.T, s *cluster.Store, n int, ttl time.Duration) {
	t.Helper()
	for i := 1; i <= n; i++ {
		m := &cluster.Machine{Name: fmt.Sprintf("m%d", i), Address: netip.AddrFrom4([4]byte{198, 18, 0, byte(i)}), MTU: 1500}
		reg, err := s.Register(ctx, m, ttl)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reg.Close(context.Background()) })
	}
}

// start runs a placer until the test ends.
func start(ctx context.Context, t *testing.T, s *cluster.Store, id string, logs *syncBuffer, hook func(string, string)) {
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	log := slog.New(slog.NewTextHandler(logs, nil))
	go func() { Run(pctx, Config{Store: s, ID: id, Log: log, beforeWrite: hook}); close(done) }()
	t.Cleanup(func() { stop(); <-done })
}

// waitLeader returns the election key of placer id once it leads.
func waitLeader(ctx context.Context, t *testing.T, s *cluster.Store, id string) *leaderKey {
	t.Helper()
	var last []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := s.Client().Get(ctx, cluster.ElectionPrefix+"placer/", clientv3.WithFirstCreate()...)
		if err == nil && len(resp.Kvs) > 0 {
			kv := resp.Kvs[0]
			if last = kv.Value; string(kv.Value) == id {
				return &leaderKey{Key: kv.Key, Created: kv.CreateRevision, Lease: kv.Lease}
			}
		}
	}
	t.Fatalf("%s does not lead after 10 s (the leader: %q)", id, last)
	return nil
}

type leaderKey struct {
	Key            []byte
	Created, Lease int64
}

// writeNetwork writes network name of tenant t straight into etcd (no quota: granted all), with
// a comment that makes each write a new generation; it returns the generation.
func writeNetwork(ctx context.Context, s *cluster.Store, name, comment string) (int64, error) {
	src := "name: " + name + "\nnodes:\n  a: {}\n  b: {}\n# " + comment + "\n"
	data, _ := json.Marshal(map[string]string{"name": name, "file": "/t/" + name + ".yaml", "source": src})
	resp, err := s.Client().Put(ctx, cluster.NetworkKey("t", name), string(data))
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// writes returns every write of the placement keys under prefix, from etcd's history: placements
// as written, a deletion as a placement with no generation.
func writes(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string) []*cluster.Placement {
	t.Helper()
	var out []*cluster.Placement
	for _, ev := range history(ctx, t, cli) {
		if !strings.HasPrefix(string(ev.Kv.Key), prefix) {
			continue
		}
		var value []byte
		if ev.Type == clientv3.EventTypePut {
			value = ev.Kv.Value
		}
		p, err := cluster.DecodePlacement(ev.Kv.Key, value, ev.Kv.ModRevision)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// history returns etcd's events of the cluster's keys from revision 1 to now (the test's etcd
// never compacts), through a watch that ends at a key the test writes last.
func history(ctx context.Context, t *testing.T, cli *clientv3.Client) []*clientv3.Event {
	t.Helper()
	endKey := cluster.Prefix + "test-history-end"
	put, err := cli.Put(ctx, endKey, "")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var out []*clientv3.Event
	for wr := range cli.Watch(wctx, cluster.Prefix, clientv3.WithPrefix(), clientv3.WithRev(1)) {
		if err := wr.Err(); err != nil {
			t.Fatalf("etcd's history: %v", err)
		}
		for _, ev := range wr.Events {
			if ev.Kv.ModRevision >= put.Header.Revision {
				return out
			}
			out = append(out, ev)
		}
	}
	t.Fatalf("etcd's history: the watch ended before revision %d", put.Header.Revision)
	return nil
}

// syncBuffer is the placers' log, written by several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestOneWriterAcrossQuorumLoss runs three placers on a 3-member etcd while networks change
// all the time, and takes two members away (the quorum is lost) for longer than the placers'
// sessions, then brings them back; TRELLIS_PLACER_SOAK=N does it N times (default once). From
// etcd's history it checks that every placement was written by the placer that held the
// election at that revision, under the term it wrote, and that no write of an older term came
// after one of a newer term; and that the networks are placed at their last generation after.
func TestOneWriterAcrossQuorumLoss(t *testing.T) {
	rounds := soakRounds(t)
	c := etcdtest.Start(t, 3)
	admin := cluster.New(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*time.Minute+time.Minute)
	defer cancel()
	register(ctx, t, admin, 3, 10*time.Minute) // outlives the quorum losses: placements keep their machines
	logs := &syncBuffer{}
	for _, id := range []string{"p1", "p2", "p3"} {
		start(ctx, t, cluster.New(c.Client()), id, logs, nil)
	}
	const networks = 6
	wctx, stopWriting := context.WithCancel(ctx)
	writing := make(chan struct{})
	go func() { change(wctx, admin, networks); close(writing) }()
	down := SessionTTL + 3*time.Second
	for r := range rounds {
		time.Sleep(3 * time.Second)
		a, b := (r+1)%3, (r+2)%3
		t.Logf("round %d: etcd members %d and %d stopped for %v", r+1, a+1, b+1, down)
		c.Kill(a)
		c.Kill(b)
		time.Sleep(down)
		c.Restart(a)
		c.Restart(b)
		if err := c.WaitHealthy(30 * time.Second); err != nil {
			t.Fatalf("etcd after the quorum came back: %v\n%s", err, c.Logs())
		}
		time.Sleep(2 * SessionTTL) // the old sessions' leases expire, and a placer leads again
	}
	stopWriting()
	<-writing
	nets, _, err := admin.Networks(ctx, "t")
	if err != nil || len(nets) != networks {
		t.Fatalf("networks %v: %v; want %d", nets, err, networks)
	}
	for _, n := range nets {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			p, err := admin.Placement(ctx, "t", n.Name)
			if err == nil && p.Generation == n.Revision {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("network %s not placed at its last generation %d: %+v, %v\n%s", n.Name, n.Revision, p, err, logs)
			}
		}
	}
	ws, wrote := checkWriters(t, history(ctx, t, admin.Client()))
	leading := leadingRE.FindAllStringSubmatch(logs.String(), -1)
	t.Logf("%d placement writes in %d terms of leadership; %d placers logged leading", ws, len(wrote), len(leading))
	if len(wrote) < rounds+1 {
		t.Errorf("placements were written in %d terms of leadership over %d quorum losses: the leadership never changed, nothing was tested", len(wrote), rounds)
	}
	// Networks change every 50 ms: a placer that leads writes at once. One that logged leading
	// and wrote nothing woke up as leader with a session that had ended (two placers "leading"
	// 1 ms apart after the quorum came back).
	for _, m := range leading {
		if term, _ := strconv.ParseInt(m[2], 10, 64); !wrote[term] {
			t.Errorf("%s logged leading in term %s and wrote nothing in it", m[1], m[2])
		}
	}
	if t.Failed() {
		t.Logf("placers' logs:\n%s", logs)
	}
}

// soakRounds is $TRELLIS_PLACER_SOAK, the number of quorum losses, or 1.
func soakRounds(t *testing.T) int {
	v := os.Getenv("TRELLIS_PLACER_SOAK")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("TRELLIS_PLACER_SOAK=%q: want a number of rounds, 1 or more", v)
	}
	return n
}

// change writes networks n0..nN-1 anew, one every 50 ms, until ctx ends (writes fail while
// etcd has no quorum).
func change(ctx context.Context, s *cluster.Store, networks int) {
	for i := 0; ctx.Err() == nil; i++ {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		writeNetwork(wctx, s, fmt.Sprintf("n%d", i%networks), strconv.Itoa(i))
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkWriters checks, from etcd's history, that every placement was written by the placer
// that led at its revision (whose election key was the oldest there): its term is that key's
// create revision (the key holds the placer's ID); and that no write of an older term came
// after one of a newer term. It returns the number of
// placement writes, and the terms that wrote.
func checkWriters(t *testing.T, events []*clientv3.Event) (int, map[int64]bool) {
	t.Helper()
	type term struct {
		id               string
		created, deleted int64
	}
	var terms []*term // in the order they were made
	byKey := map[string]*term{}
	leader := func() *term { // at the revision of the event at hand
		for _, tm := range terms {
			if tm.deleted == 0 {
				return tm
			}
		}
		return nil
	}
	wrote := map[int64]bool{}
	var writes int
	var newest int64
	for _, ev := range events {
		key, rev := string(ev.Kv.Key), ev.Kv.ModRevision
		switch {
		case strings.HasPrefix(key, cluster.ElectionPrefix+"placer/"):
			tm := byKey[key]
			switch {
			case ev.Type == clientv3.EventTypeDelete:
				tm.deleted = rev
			case tm != nil && tm.deleted == 0:
				tm.id = string(ev.Kv.Value) // the same candidacy proclaimed again
			default:
				tm = &term{id: string(ev.Kv.Value), created: ev.Kv.CreateRevision}
				terms, byKey[key] = append(terms, tm), tm
			}
		case strings.HasPrefix(key, cluster.PlacementsPrefix):
			writes++
			l := leader()
			if ev.Type == clientv3.EventTypeDelete {
				if l == nil {
					t.Errorf("%s deleted at revision %d, while no placer led", key, rev)
				}
				continue
			}
			var p cluster.Placement
			if err := json.Unmarshal(ev.Kv.Value, &p); err != nil {
				t.Fatalf("%s at revision %d: %v", key, rev, err)
			}
			writer := "no placer"
			for _, tm := range terms {
				if tm.created == p.Term {
					writer = tm.id
				}
			}
			switch {
			case l == nil:
				t.Errorf("%s written at revision %d by %s (term %d), while no placer led", key, rev, writer, p.Term)
			case l.created != p.Term:
				t.Errorf("%s written at revision %d by %s (term %d), while %s led (term %d)", key, rev, writer, p.Term, l.id, l.created)
			}
			if p.Term < newest {
				t.Errorf("%s written at revision %d by %s (term %d), after a write of the newer term %d", key, rev, writer, p.Term, newest)
			}
			newest = max(newest, p.Term)
			wrote[p.Term] = true
		}
	}
	return writes, wrote
}

// leadingRE is the log line of a placer that leads.
var leadingRE = regexp.MustCompile(`msg=leading placer=(\S+) term=(\d+)`)
