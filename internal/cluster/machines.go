package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Machine is a machine's registration: what its agent offers to placement.
type Machine struct {
	Name    string     `json:"-"`
	Address netip.Addr `json:"address"` // underlay IPv4 address: tunnels run between these
	MTU     int        `json:"mtu"`     // underlay MTU
	Cores   float64    `json:"cores"`
	Memory  uint64     `json:"memory"` // bytes
	Rate    uint64     `json:"rate"`   // NIC rate, bits per second (0: not known, not limited)
	Agent   string     `json:"agent"`  // the agent's version and process, for people
	// Endpoint is the agent's HTTPS URL (mutual TLS) for exec and link, "" if it serves none.
	Endpoint string    `json:"endpoint,omitempty"`
	Since    time.Time `json:"since"`
	// Lease is the etcd lease the registration is bound to: when the agent stops renewing it,
	// the registration goes, and the placer moves the machine's nodes.
	Lease clientv3.LeaseID `json:"-"`
}

// Registration is a machine registered under a lease that is kept alive until Close.
type Registration struct {
	Lease clientv3.LeaseID
	// Lost is closed when the lease is lost (etcd unreachable for longer than its TTL, or the
	// lease revoked): the machine is no longer registered.
	Lost   <-chan struct{}
	cancel context.CancelFunc
	cli    *clientv3.Client
}

// Register registers machine m under a new lease of ttl and keeps the lease alive until Close.
// A name that another live agent registered is refused with ErrMachineTaken, naming it, unless
// m.Lease is the lease the registration is bound to (the same agent, restarted before its lease
// expired): then that lease is kept alive again, and nothing notices the restart.
func (s *Store) Register(ctx context.Context, m *Machine, ttl time.Duration) (*Registration, error) {
	if err := checkName("machine", m.Name); err != nil {
		return nil, err
	}
	m.Since = time.Now().UTC()
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	lease, err := s.cli.Grant(ctx, int64(ttl.Round(time.Second)/time.Second))
	if err != nil {
		return nil, unreachable(err, s.cli.Endpoints())
	}
	key := MachineKey(m.Name)
	id := lease.ID
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(data), clientv3.WithLease(id))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err == nil && !resp.Succeeded && m.Lease != 0 {
		// An agent that restarted within its lease's time takes its registration back.
		resp, err = s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.LeaseValue(key), "=", m.Lease)).
			Then(clientv3.OpPut(key, string(data), clientv3.WithLease(m.Lease))).
			Else(clientv3.OpGet(key)).
			Commit()
		s.cli.Revoke(context.WithoutCancel(ctx), lease.ID)
		id = m.Lease
	}
	if err == nil && !resp.Succeeded {
		err = taken(m.Name, resp)
	}
	if err != nil {
		if id == lease.ID {
			s.cli.Revoke(context.WithoutCancel(ctx), id)
		}
		return nil, unreachable(err, s.cli.Endpoints())
	}
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	lost := make(chan struct{})
	go func() {
		keepAlive(kctx, s.cli, id, ttl)
		close(lost)
	}()
	m.Lease = id
	return &Registration{Lease: id, Lost: lost, cancel: cancel, cli: s.cli}, nil
}

func taken(name string, resp *clientv3.TxnResponse) error {
	var other Machine
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		json.Unmarshal(kvs[0].Value, &other)
	}
	return fmt.Errorf("%w: %s is registered by agent %s since %s; stop that agent or choose another --machine",
		ErrMachineTaken, name, other.Agent, other.Since.Format(time.RFC3339))
}

// Stop stops keeping the lease alive: the registration goes when the lease expires, unless an
// agent registers again with the same lease before (see Register).
func (r *Registration) Stop() { r.cancel() }

// Close stops keeping the lease alive and revokes it, so the registration goes at once.
func (r *Registration) Close(ctx context.Context) error {
	r.cancel()
	_, err := r.cli.Revoke(ctx, r.Lease)
	return err
}

// Machines lists the registered machines, by name, and the revision they were read at.
func (s *Store) Machines(ctx context.Context) ([]*Machine, int64, error) {
	resp, err := s.cli.Get(ctx, MachinesPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, unreachable(err, s.cli.Endpoints())
	}
	var out []*Machine
	for _, kv := range resp.Kvs {
		var m Machine
		if err := json.Unmarshal(kv.Value, &m); err != nil {
			return nil, 0, fmt.Errorf("cluster: key %s: %w", kv.Key, err)
		}
		m.Name, m.Lease = string(kv.Key[len(MachinesPrefix):]), clientv3.LeaseID(kv.Lease)
		out = append(out, &m)
	}
	return out, resp.Header.Revision, nil
}

// keepAlive renews lease id until ctx ends or the lease is lost: etcd no longer knows it, or no
// renewal got through for its whole ttl. Each renewal is a request of its own: the client
// spreads requests over the members (round robin), so a renewal stuck on a member that went
// away silently (its machine lost, no reset ever comes) does not hold the next, which goes to
// another member every ttl/6 while it waits. One long keep-alive stream, as clientv3's
// KeepAlive keeps, would wait for gRPC's keepalive to notice the dead member (DialKeepAliveTime
// + DialKeepAliveTimeout, 4 s), longer than a short lease lives. A renewal that is slow is not
// given up (each waits up to ttl): on a loaded machine etcd answers them in more than ttl/6,
// and renewals cancelled that soon all failed, and the lease expired with etcd up.
func keepAlive(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID, ttl time.Duration) {
	every := max(ttl/3, 100*time.Millisecond)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the renewals still under way
	results := make(chan error)
	renew := func() {
		rctx, rcancel := context.WithTimeout(ctx, ttl)
		defer rcancel()
		resp, err := cli.KeepAliveOnce(rctx, id)
		if err == nil && resp.TTL <= 0 {
			err = rpctypes.ErrLeaseNotFound
		}
		select {
		case results <- err:
		case <-ctx.Done():
		}
	}
	renewed := time.Now()
	go renew()
	next := time.NewTimer(every / 2) // another renewal if none answered by then
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case err := <-results:
			switch {
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				return
			case err == nil:
				renewed = time.Now()
				next.Reset(every)
			default:
				next.Reset(50 * time.Millisecond) // failed at once: try another member
			}
			continue
		case <-next.C:
		}
		if time.Since(renewed) > ttl {
			return
		}
		go renew()
		next.Reset(every / 2)
	}
}
