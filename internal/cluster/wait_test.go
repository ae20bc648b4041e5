package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestProgressState(t *testing.T) {
	placed := &Placement{}
	for _, tc := range []struct {
		name string
		p    Progress
		want string
	}{
		{"not placed", Progress{}, "placing"},
		{"refused", Progress{Placement: &Placement{Refused: "no room"}}, "refused"},
		{"failed at this generation", Progress{Placement: placed, Statuses: []*Status{{Generation: 3, State: Failed}}}, "failed"},
		{"failed at an older generation", Progress{Placement: placed, Statuses: []*Status{{Generation: 2, State: Failed}}, Waiting: []string{"m1"}}, "converging"},
		{"waiting", Progress{Placement: placed, Waiting: []string{"m1"}}, "converging"},
		{"every machine done", Progress{Placement: placed}, "up"},
	} {
		if got := tc.p.State(3); got != tc.want {
			t.Errorf("%s: State(3) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestWait waits for a generation against a real etcd while something happens meanwhile: the
// agents converge it, it is refused or fails, another up overtakes it, a down removes it, no
// placer places it, or etcd loses its quorum. Each wait ends with its answer within a second
// of what ended it (the quorum: within pollTimeout and a second).
func TestWait(t *testing.T) {
	c := etcdtest.Start(t, 3)
	s := New(c.Client())
	// The helpers run in the test's goroutine and in meanwhile's: they report with t.Error.
	placed := func(ctx context.Context, t *testing.T, tenant string, gen int64, refused string) {
		t.Helper()
		p := &Placement{Tenant: tenant, Network: "lab", Generation: gen, Refused: refused, Nodes: map[string]string{"a": "m1", "b": "m2"},
			Machines: map[string]Underlay{"m1": {MTU: 1500}, "m2": {MTU: 1500}}}
		if refused != "" {
			p.Nodes = nil
		}
		prev, err := s.Placement(ctx, tenant, "lab")
		var rev int64
		if err == nil {
			rev = prev.Revision
		}
		if _, err := s.PutPlacement(ctx, p, rev); err != nil {
			t.Errorf("placement: %v", err)
		}
	}
	report := func(ctx context.Context, t *testing.T, tenant, machine string, gen int64, state string) {
		t.Helper()
		if err := s.PutStatus(ctx, &Status{Tenant: tenant, Network: "lab", Machine: machine, Generation: gen, State: state, Nodes: 1, Error: "boom"}, 0); err != nil {
			t.Errorf("report: %v", err)
		}
	}
	up := func(ctx context.Context, t *testing.T, tenant string, expect int64, source string) int64 {
		t.Helper()
		gen, err := s.Up(ctx, &Network{Tenant: tenant, Name: "lab", Source: source}, expect)
		if err != nil {
			t.Errorf("up: %v", err)
		}
		return gen
	}
	for _, tc := range []struct {
		name string
		// before runs before the wait; meanwhile runs 300 ms into it and returns the
		// generation the network is at after it (0: none).
		before    func(ctx context.Context, t *testing.T, tenant string, gen int64)
		meanwhile func(ctx context.Context, t *testing.T, tenant string, gen int64) int64
		wait      time.Duration
		err       error  // nil: converged
		want      string // in the error; {gen} is the wait's generation, {now} meanwhile's
	}{
		{name: "converged", meanwhile: func(ctx context.Context, t *testing.T, tenant string, gen int64) int64 {
			placed(ctx, t, tenant, gen, "")
			report(ctx, t, tenant, "m1", gen, Converged)
			report(ctx, t, tenant, "m2", gen, Converged)
			return gen
		}},
		{name: "overtaken before it was placed", err: ErrOvertaken,
			want: "network lab of tenant {tenant}: generation {gen} was overtaken by generation {now} (another up of the network) before it converged",
			meanwhile: func(ctx context.Context, t *testing.T, tenant string, gen int64) int64 {
				return up(ctx, t, tenant, gen, "v2")
			}},
		{name: "overtaken while converging", err: ErrOvertaken, want: "generation {gen} was overtaken by generation {now}",
			before: func(ctx context.Context, t *testing.T, tenant string, gen int64) {
				placed(ctx, t, tenant, gen, "")
				report(ctx, t, tenant, "m1", gen, Converged)
				report(ctx, t, tenant, "m2", gen, Converging)
			},
			meanwhile: func(ctx context.Context, t *testing.T, tenant string, gen int64) int64 {
				gen2 := up(ctx, t, tenant, gen, "v2")
				placed(ctx, t, tenant, gen2, "")
				return gen2
			}},
		{name: "converged, then overtaken", // it did converge: the up that wrote it is done
			before: func(ctx context.Context, t *testing.T, tenant string, gen int64) {
				placed(ctx, t, tenant, gen, "")
				report(ctx, t, tenant, "m1", gen, Converged)
				report(ctx, t, tenant, "m2", gen, Converged)
				up(ctx, t, tenant, gen, "v2")
			}},
		{name: "removed", err: ErrOvertaken, want: "network lab of tenant {tenant} was removed (a down) before generation {gen} converged",
			meanwhile: func(ctx context.Context, t *testing.T, tenant string, gen int64) int64 {
				if err := s.Down(ctx, tenant, "lab", gen); err != nil {
					t.Error(err)
				}
				return 0
			}},
		{name: "refused", err: ErrRefused, want: "network lab does not fit: memory: need 9, free 1",
			meanwhile: func(ctx context.Context, t *testing.T, tenant string, gen int64) int64 {
				placed(ctx, t, tenant, gen, "memory: need 9, free 1")
				return gen
			}},
		{name: "failed on a machine", err: ErrFailed, want: "network lab: on m2: boom",
			meanwhile: func(ctx context.Context, t *testing.T, tenant string, gen int64) int64 {
				placed(ctx, t, tenant, gen, "")
				report(ctx, t, tenant, "m2", gen, Failed)
				return gen
			}},
		{name: "no placer", wait: time.Second, want: "network lab, generation {gen}: not converged in time: no placement yet (is a placer running?)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			tenant := fmt.Sprintf("wait%d", time.Now().UnixNano()%1e9)
			gen := up(ctx, t, tenant, 0, "v1")
			if tc.before != nil {
				tc.before(ctx, t, tenant, gen)
			}
			now, ended, done := gen, time.Time{}, make(chan struct{})
			if tc.meanwhile != nil {
				go func() {
					defer close(done)
					time.Sleep(300 * time.Millisecond)
					now, ended = tc.meanwhile(ctx, t, tenant, gen), time.Now()
				}()
			} else {
				close(done)
			}
			wait := tc.wait
			if wait == 0 {
				wait = 10 * time.Second
			}
			wctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			start := time.Now()
			_, err := s.Wait(wctx, tenant, "lab", gen)
			end := time.Now()
			took := end.Sub(start)
			<-done
			if tc.err != nil && !errors.Is(err, tc.err) || tc.want == "" && err != nil {
				t.Fatalf("Wait: %v, want %v", err, tc.err)
			}
			want := strings.NewReplacer("{gen}", fmt.Sprint(gen), "{now}", fmt.Sprint(now), "{tenant}", tenant).Replace(tc.want)
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
				t.Errorf("Wait: %v\nwant it to say %q", err, want)
			}
			if !ended.IsZero() && end.Sub(ended) > time.Second || ended.IsZero() && took > wait+time.Second {
				t.Errorf("Wait answered %v after it began, %v after what ended it", took, end.Sub(ended))
			}
		})
	}

	// Wait reads etcd when the network, its placement or a report of it changes, not ten
	// times a second: 2 s with nothing of the network changing (but another network's reports,
	// 20 of them) cost a few reads (100 ms polls read 60 times), and the reports that converge
	// it end the wait at once.
	t.Run("reads on changes", func(t *testing.T) {
		ctx := ctxT(t)
		cli := c.Client()
		reads := &countKV{KV: cli.KV}
		cli.KV = reads
		cs := New(cli)
		gen := up(ctx, t, "waitr", 0, "v1")
		placed(ctx, t, "waitr", gen, "")
		endedC, done := make(chan time.Time, 1), make(chan struct{})
		go func() {
			defer close(done)
			for i := range 20 {
				time.Sleep(100 * time.Millisecond)
				if err := s.PutStatus(ctx, &Status{Tenant: "waitr", Network: "other", Machine: "m1", Generation: int64(i + 1), State: Converged}, 0); err != nil {
					t.Errorf("report: %v", err)
				}
			}
			report(ctx, t, "waitr", "m1", gen, Converged)
			endedC <- time.Now()
			report(ctx, t, "waitr", "m2", gen, Converged)
		}()
		pr, err := cs.Wait(ctx, "waitr", "lab", gen)
		end := time.Now()
		<-done // its reports are written (and its errors reported) before the test ends
		if err != nil || !pr.Done() {
			t.Fatalf("Wait: %+v, %v; want done", pr, err)
		}
		if n := reads.n.Load(); n > 25 {
			t.Errorf("Wait read etcd %d times in 2 s, want at most 25: it polls instead of watching", n)
		}
		ended := <-endedC
		if end.Sub(ended) > 300*time.Millisecond {
			t.Errorf("Wait answered %v after the last report, want at once (at most 300 ms)", end.Sub(ended))
		}
	})

	// A placement written again at the same generation (a lost machine's nodes placed on the
	// others) is not converged until every machine reported that placement: one whose nodes
	// stay must still change its tunnels. 2c31a7d took the reports of the earlier one.
	t.Run("placement written again", func(t *testing.T) {
		ctx := ctxT(t)
		gen := up(ctx, t, "waitp", 0, "v1")
		placed(ctx, t, "waitp", gen, "")
		reportOf := func(machine string) {
			t.Helper()
			p, err := s.Placement(ctx, "waitp", "lab")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.PutStatus(ctx, &Status{Tenant: "waitp", Network: "lab", Machine: machine, Generation: gen, Placement: p.Revision, State: Converged, Nodes: 1}, 0); err != nil {
				t.Fatal(err)
			}
		}
		waiting := func(want ...string) {
			t.Helper()
			pr, err := s.ProgressOf(ctx, "waitp", "lab", gen)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(pr.Waiting, ",") != strings.Join(want, ",") || pr.Done() != (len(want) == 0) {
				t.Errorf("waiting for %v (done: %v), want %v", pr.Waiting, pr.Done(), want)
			}
		}
		reportOf("m1")
		reportOf("m2")
		waiting()
		placed(ctx, t, "waitp", gen, "") // the same nodes, written again
		waiting("m1", "m2")
		reportOf("m2")
		waiting("m1")
		// An agent that does not say which placement it applied (0) is taken at its word.
		if err := s.PutStatus(ctx, &Status{Tenant: "waitp", Network: "lab", Machine: "m1", Generation: gen, State: Converged, Nodes: 1}, 0); err != nil {
			t.Fatal(err)
		}
		waiting()
	})

	// Last, as it breaks the cluster: a quorum lost while waiting ends the wait, naming etcd.
	t.Run("quorum lost", func(t *testing.T) {
		ctx := ctxT(t)
		gen := up(ctx, t, "waitq", 0, "v1")
		lost := make(chan time.Time, 1)
		go func() { time.Sleep(300 * time.Millisecond); c.Kill(1); c.Kill(2); lost <- time.Now() }()
		_, err := s.Wait(ctx, "waitq", "lab", gen)
		end := time.Now()
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), fmt.Sprintf("network lab: generation %d was written, but waiting for it to converge stopped: ", gen)) {
			t.Fatalf("Wait with etcd's quorum lost: %v, want ErrUnreachable saying the generation was written", err)
		}
		if took := end.Sub(<-lost); took > pollTimeout+time.Second {
			t.Errorf("Wait answered %v after the quorum was lost, want at most %v", took, pollTimeout+time.Second)
		}
		t.Logf("quorum lost: %v", err)
	})
}

// countKV counts the reads and transactions made through it.
type countKV struct {
	clientv3.KV
	n atomic.Int64
}

func (k *countKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	k.n.Add(1)
	return k.KV.Get(ctx, key, opts...)
}

func (k *countKV) Txn(ctx context.Context) clientv3.Txn {
	k.n.Add(1)
	return k.KV.Txn(ctx)
}
