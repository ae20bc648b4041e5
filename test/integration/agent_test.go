//go:build integration

package integration

// The agent of a cluster (trellis agent) on this machine, against a real 3-member etcd on
// loopback: it registers, converges a network placed on it, reports status, is killed with -9
// and started again without disturbing the network, keeps the network forwarding while every
// etcd member is down, catches up afterwards, and removes the network when it goes.

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/agent"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	"github.com/trellisnet/trellis/internal/cluster/pki"
)

// agentProc is a `trellis agent` process of a test.
type agentProc struct {
	cmd  *exec.Cmd
	log  *lockedBuffer
	done chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startAgent starts `trellis agent` for machine on state directory dir; t's cleanup kills it if
// it still runs (give the test, not a subtest, for an agent that outlives the subtest).
func startAgent(t *testing.T, c *etcdtest.Cluster, dir, machine, address string) *agentProc {
	t.Helper()
	return startAgentAs(t, c, c.Root, dir, machine, address, "--listen", "127.0.0.1:0") // a free port: not the default
}

// startAgentAs is startAgent with the agent's certificate files, and more flags.
func startAgentAs(t *testing.T, c *etcdtest.Cluster, f pki.Files, dir, machine, address string, flags ...string) *agentProc {
	t.Helper()
	cmd := exec.Command(trellisBin, append([]string{"--state-dir", dir, "agent", "--etcd", strings.Join(c.Endpoints, ","),
		"--machine", machine, "--address", address, "--lease", "3s",
		"--cacert", f.CA, "--cert", f.Cert, "--key", f.Key}, flags...)...)
	a := &agentProc{cmd: cmd, log: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = a.log, a.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(a.done) }()
	t.Cleanup(func() { a.kill() })
	return a
}

func (a *agentProc) kill() {
	a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.done
}

func (a *agentProc) running() bool {
	select {
	case <-a.done:
		return false
	default:
		return true
	}
}

// waitFor polls cond every 100 ms until it holds, failing the test with what after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, detail := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %v; %s", what, timeout, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitConverged waits until machine reports network converged at generation gen.
func waitConverged(t *testing.T, s *cluster.Store, a *agentProc, tenant, network, machine string, gen int64) time.Duration {
	t.Helper()
	return waitFor(t, 60*time.Second, fmt.Sprintf("%s/%s converged on %s at generation %d", tenant, network, machine, gen), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		sts, err := s.Statuses(ctx, tenant, network)
		if err != nil {
			return false, err.Error()
		}
		for _, st := range sts {
			if st.Machine == machine && st.Generation == gen {
				if st.State == cluster.Failed {
					t.Fatalf("%s/%s failed on %s: %s\nagent log:\n%s", tenant, network, machine, st.Error, a.log)
				}
				return st.State == cluster.Converged, st.State
			}
		}
		return false, fmt.Sprintf("status %+v\nagent log:\n%s", sts, a.log)
	})
}

const agentTopo = `name: two
nodes:
  a:
    addresses:
      eth1: [10.0.0.1/24]
  b:
    addresses:
      eth1: [10.0.0.2/24]
links:
  - name: ab
    endpoints: [a:eth1, b:eth1]
%s`

// place writes the desired network and a placement of every node on m1, as the placer will.
func place(t *testing.T, s *cluster.Store, source string, expect int64) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gen, err := s.Up(ctx, &cluster.Network{Tenant: "t1", Name: "two", File: "/t/two.yaml", Source: source}, expect)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := s.Placement(ctx, "t1", "two")
	var prevRev int64
	if err == nil {
		prevRev = prev.Revision
	}
	p := &cluster.Placement{Tenant: "t1", Network: "two", Generation: gen, Nodes: map[string]string{"a": "m1", "b": "m1"},
		Machines: map[string]cluster.Underlay{"m1": {Address: netip.MustParseAddr("127.0.0.1"), MTU: 1500}}}
	if _, err := s.PutPlacement(ctx, p, prevRev); err != nil {
		t.Fatal(err)
	}
	return gen
}

func TestAgent(t *testing.T) {
	e := start(t)
	local := agent.LocalName("t1", "two")
	registerNetwork(local)
	c := etcdtest.Start(t, 3)
	s := cluster.New(c.Client())
	ag := startAgent(t, c, e.state, "m1", "127.0.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitFor(t, 10*time.Second, "machine m1 registered", func() (bool, string) {
		ms, _, err := s.Machines(ctx)
		return err == nil && len(ms) == 1 && ms[0].Name == "m1" && ms[0].Cores > 0 && ms[0].Memory > 0, fmt.Sprint(ms, err, ag.log)
	})

	gen := place(t, s, fmt.Sprintf(agentTopo, ""), 0)
	took := waitConverged(t, s, ag, "t1", "two", "m1", gen)
	t.Logf("placement to converged: %v", took.Round(time.Millisecond))
	// The apply's steps are records of the agent's log, with the network and the step's fields.
	stepLine := regexp.MustCompile(`level=INFO msg="2 nodes started in [0-9.]+s" machine=m1 network=` + regexp.QuoteMeta(local) + ` generation=` + fmt.Sprint(gen) + ` step="nodes started" count=2 seconds=[0-9.]+\n`)
	if !stepLine.MatchString(ag.log.String()) {
		t.Errorf("agent log has no record matching %s:\n%s", stepLine, ag.log)
	}
	ping(t, e.state, local, "a", "10.0.0.2")
	pids := inspect(t, e.state, local).pids()
	lease := func() int64 {
		ms, _, err := s.Machines(ctx)
		if err != nil || len(ms) != 1 {
			t.Fatalf("machines: %v (%v)", ms, err)
		}
		return int64(ms[0].Lease)
	}
	first := lease()

	outer := t
	t.Run("kill -9 and start again", func(t *testing.T) {
		ag.kill()
		ping(t, e.state, local, "a", "10.0.0.2")
		ag = startAgent(outer, c, e.state, "m1", "127.0.0.1")
		// A live change through the agent started again: a rate on the link restarts nothing.
		gen = place(t, s, fmt.Sprintf(agentTopo, "    rate: 50mbit\n"), gen)
		waitConverged(t, s, ag, "t1", "two", "m1", gen)
		if got := inspect(t, e.state, local); !maps.Equal(got.pids(), pids) || got.link(t, "ab").Rate != "50mbit" {
			t.Errorf("after the restart and a rate change: pids %v (before %v), rate %q; want the same pids and 50mbit\nagent log:\n%s",
				got.pids(), pids, got.link(t, "ab").Rate, ag.log)
		}
		if strings.Contains(ag.log.String(), "cannot register") || lease() != first {
			t.Errorf("the agent started again did not take its registration back (lease %x, was %x):\n%s", lease(), first, ag.log)
		}
	})

	t.Run("etcd down", func(t *testing.T) {
		for i := range 3 {
			c.Kill(i)
		}
		time.Sleep(2 * time.Second) // the agent notices: its watch and keepalives fail
		ping(t, e.state, local, "a", "10.0.0.2")
		if !ag.running() {
			t.Fatalf("the agent exited while etcd was down:\n%s", ag.log)
		}
		for i := range 3 {
			c.Restart(i)
		}
		if err := c.WaitHealthy(20 * time.Second); err != nil {
			t.Fatal(err)
		}
		if got := inspect(t, e.state, local).pids(); !maps.Equal(got, pids) {
			t.Errorf("nodes restarted while etcd was down: pids %v, before %v", got, pids)
		}
	})

	t.Run("down", func(t *testing.T) {
		if err := s.Down(ctx, "t1", "two", 0); err != nil {
			t.Fatal(err)
		}
		// As the placer does when a network goes (this test runs none).
		p, err := s.Placement(ctx, "t1", "two")
		if err != nil {
			t.Fatal(err)
		}
		_, seen, err := s.Networks(ctx, "t1")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.DropPlacement(ctx, p, seen); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "network removed from the machine and its status gone", func() (bool, string) {
			sts, err := s.Statuses(ctx, "t1", "two")
			nets := listNetworks(t, e.state)
			return err == nil && len(sts) == 0 && len(nets) == 0, fmt.Sprintf("status %v (%v), networks %v\nagent log:\n%s", sts, err, nets, ag.log)
		})
	})
	ag.kill()
	e.assertClean()
}
