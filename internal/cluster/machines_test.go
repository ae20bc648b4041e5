package cluster

import (
	"context"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
)

// TestRegistrationSurvivesASilentMember: a registration's lease stays alive while a follower
// of three etcd members stops answering without a reset (SIGSTOP: as a member whose machine was
// lost looks to a client), for longer than the lease lives. A renewal stuck on that member is
// retried on another in time. (A silent leader costs an election, during which no renewal gets
// through anywhere; etcd extends every lease when the new leader takes over.)
func TestRegistrationSurvivesASilentMember(t *testing.T) {
	c := etcdtest.Start(t, 3)
	s := New(c.Client())
	defer s.Close()
	ctx := context.Background()
	const ttl = 5 * time.Second // the agents' default (agent.DefaultLeaseTTL)
	reg, err := s.Register(ctx, &Machine{Name: "silent", Address: netip.MustParseAddr("198.18.0.1")}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	cli := c.Client()
	for i, pid := range c.PIDs() {
		st, err := cli.Status(ctx, c.Endpoints[i])
		if err != nil {
			t.Fatal(err)
		}
		if st.Leader == st.Header.MemberId {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		select {
		case <-reg.Lost:
			syscall.Kill(pid, syscall.SIGCONT)
			t.Fatalf("member %d silent: the lease was lost within %v", i, 2*ttl)
		case <-time.After(2 * ttl):
		}
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitHealthy(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	ms, _, err := s.Machines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Lease != reg.Lease {
		t.Fatalf("after each member was silent in turn: registered %v, want silent under lease %x", ms, reg.Lease)
	}
}
