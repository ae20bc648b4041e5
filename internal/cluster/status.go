package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Status states an agent reports for its part of a network.
const (
	Converging = "converging" // the agent is applying the placement's generation
	Converged  = "converged"  // the machine holds its part of that generation
	Failed     = "failed"     // applying it failed; Error says why
)

// Status is what one machine's agent reports of its part of a network.
type Status struct {
	Tenant, Network, Machine string `json:"-"`
	// Generation is the network generation (the placement's) the report is about.
	Generation int64 `json:"generation"`
	// Placement is the revision of the placement the report is about: a placement written
	// again at the same generation (a lost machine's nodes placed on the others) changes the
	// tunnels of machines whose nodes stay, and their report of the earlier one does not say
	// that they converged to it. 0: an agent that does not say (before 2026-11-28).
	Placement int64     `json:"placement,omitempty"`
	State     string    `json:"state"`
	Error     string    `json:"error,omitempty"`
	Nodes     int       `json:"nodes"` // nodes and links of the network on the machine
	Links     int       `json:"links"`
	Took      float64   `json:"took"` // seconds the last apply took
	Time      time.Time `json:"time"`
	// Ports counts the traffic of the network's ports on the machine (one per link endpoint
	// of its nodes), as of Time; the agent refreshes it every --counters.
	Ports []Port `json:"ports,omitempty"`
}

// Port is what one node's interface sent into and received from its link.
type Port struct {
	Link      string `json:"link"`
	Endpoint  string `json:"endpoint"` // NODE:IF
	TxPackets uint64 `json:"tx_packets"`
	TxBytes   uint64 `json:"tx_bytes"`
	RxPackets uint64 `json:"rx_packets"`
	RxBytes   uint64 `json:"rx_bytes"`
	Drops     uint64 `json:"drops"` // dropped by the port's shaper
}

// SameReport tells whether two reports say the same but for their time and counters.
func SameReport(a, b *Status) bool {
	return a.Generation == b.Generation && a.Placement == b.Placement && a.State == b.State && a.Error == b.Error && a.Nodes == b.Nodes && a.Links == b.Links
}

// PutStatus writes an agent's report. Reports are bound to the agent's lease (0: none), so a
// machine that is lost takes its reports with it.
func (s *Store) PutStatus(ctx context.Context, st *Status, lease clientv3.LeaseID) error {
	st.Time = time.Now().UTC()
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	var opts []clientv3.OpOption
	if lease != 0 {
		opts = append(opts, clientv3.WithLease(lease))
	}
	if _, err := s.cli.Put(ctx, StatusKey(st.Tenant, st.Network, st.Machine), string(data), opts...); err != nil {
		return unreachable(err, s.cli.Endpoints())
	}
	return nil
}

// DeleteStatus removes a machine's report of a network (its part is gone).
func (s *Store) DeleteStatus(ctx context.Context, tenant, network, machine string) error {
	if _, err := s.cli.Delete(ctx, StatusKey(tenant, network, machine)); err != nil {
		return unreachable(err, s.cli.Endpoints())
	}
	return nil
}

// Statuses lists the reports of a tenant's network from every machine, by machine (the
// machines that still hold it after its placement went, too: down waits for none to be left).
func (s *Store) Statuses(ctx context.Context, tenant, network string) ([]*Status, error) {
	if err := checkNames(tenant, network); err != nil {
		return nil, err
	}
	resp, err := s.cli.Get(ctx, TenantPrefix(StatusPrefix, tenant), clientv3.WithPrefix())
	if err != nil {
		return nil, unreachable(err, s.cli.Endpoints())
	}
	var out []*Status
	for _, kv := range resp.Kvs {
		parts := splitKey(string(kv.Key), StatusPrefix)
		if len(parts) != 3 {
			return nil, fmt.Errorf("cluster: key %s is not status/TENANT/MACHINE/NETWORK", kv.Key)
		}
		if parts[2] != network {
			continue
		}
		st := &Status{Tenant: parts[0], Network: parts[2], Machine: parts[1]}
		if err := json.Unmarshal(kv.Value, st); err != nil {
			return nil, fmt.Errorf("cluster: key %s: %w", kv.Key, err)
		}
		out = append(out, st)
	}
	return out, nil
}

// statusesOf reads, in one transaction, the report of each machine that placement p names: what
// ProgressOf (up's wait, ls, inspect) needs, without reading the tenant's other networks'.
func (s *Store) statusesOf(ctx context.Context, p *Placement) ([]*Status, error) {
	named := map[string]bool{}
	for m := range p.Machines {
		named[m] = true
	}
	for _, m := range p.Nodes {
		named[m] = true
	}
	machines := slices.Sorted(maps.Keys(named))
	ops := make([]clientv3.Op, len(machines))
	for i, m := range machines {
		ops[i] = clientv3.OpGet(StatusKey(p.Tenant, p.Network, m))
	}
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, unreachable(err, s.cli.Endpoints())
	}
	var out []*Status
	for i, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			st := &Status{Tenant: p.Tenant, Network: p.Network, Machine: machines[i]}
			if err := json.Unmarshal(kv.Value, st); err != nil {
				return nil, fmt.Errorf("cluster: key %s: %w", kv.Key, err)
			}
			out = append(out, st)
		}
	}
	return out, nil
}
