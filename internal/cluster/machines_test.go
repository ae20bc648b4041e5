package cluster

import (
	"context"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
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

// TestRegistrationSurvivesSlowRenewals: a registration's lease stays alive when every renewal
// takes 0.8 s to reach etcd, more than a sixth of the lease (as on a loaded machine, where a
// lease expired during a 100-network up). Renewals given up after a sixth of the lease never
// got through, and the lease was lost.
func TestRegistrationSurvivesSlowRenewals(t *testing.T) {
	c := etcdtest.Start(t, 1)
	tc, err := c.Root.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg := ClientConfig(c.Endpoints, tc)
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithStreamInterceptor(
		func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			if strings.HasSuffix(method, "/LeaseKeepAlive") {
				select {
				case <-time.After(800 * time.Millisecond):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return streamer(ctx, desc, cc, method, opts...)
		}))
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := New(cli)
	defer s.Close()
	ctx := context.Background()
	const ttl = 2 * time.Second
	reg, err := s.Register(ctx, &Machine{Name: "slow", Address: netip.MustParseAddr("198.18.0.1")}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	select {
	case <-reg.Lost:
		t.Fatal("the lease was lost though every renewal got through in 0.8 s")
	case <-time.After(3 * ttl):
	}
	if ms, _, err := s.Machines(ctx); err != nil || len(ms) != 1 {
		t.Errorf("machines registered after %v: %v, %v; want slow", 3*ttl, ms, err)
	}
}
