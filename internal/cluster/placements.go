package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Placement says where a network's nodes run, for one generation of the network. The placer
// writes it; every agent holding a node of it converges its machine to it.
type Placement struct {
	Tenant  string `json:"-"`
	Network string `json:"-"`
	// Generation is the revision of the desired network this placement was made for.
	Generation int64             `json:"generation"`
	Nodes      map[string]string `json:"nodes"` // node -> machine
	// Machines are the underlay addresses of the machines in Nodes, as registered when placed,
	// so that each agent plans the tunnels to the others without reading their registrations.
	Machines map[string]Underlay `json:"machines"`
	// Secret keys the network's tunnel keys (plan.TunnelKey): random, drawn when the network
	// is first placed and kept while it exists, so that a host on the underlay cannot derive
	// a link's key from the names. Hex.
	Secret string `json:"secret,omitempty"`
	// Keys are the tunnel keys of the links whose endpoints are on more than one machine,
	// unique in the cluster and unpredictable from the names (placer.tunnelKeys); a link
	// without one derives its key from Secret and the names (placements written before keys
	// were allocated).
	Keys map[string]uint32 `json:"keys,omitempty"`
	// Refused says why the network could not be placed (the machine and resource that are
	// short); then Nodes is empty and nothing of the network is created.
	Refused string    `json:"refused,omitempty"`
	Placed  time.Time `json:"placed"`
	// Term is the create revision of the election key the placer that wrote it led with
	// (Fence.Rev): the key, and the placer's ID in it, are in etcd's history.
	Term int64 `json:"term,omitempty"`
	// Revision is etcd's revision of the placement's last change.
	Revision int64 `json:"-"`
}

// Underlay is how the other machines reach one machine's tunnels.
type Underlay struct {
	Address netip.Addr `json:"address"`
	MTU     int        `json:"mtu"`
	// Endpoint is the machine's agent's HTTPS URL, where the network's tenant sends exec and
	// link (a tenant may read its placements, not the machines).
	Endpoint string `json:"endpoint,omitempty"`
}

// PutPlacement writes a placement if the desired network is still at generation p.Generation
// and the placement is still as the caller read it (expect: its revision, 0 for none). A
// placement for a network that changed or went meanwhile is refused with ErrConflict; one of a
// fenced store whose fence went, with ErrNotLeader.
func (s *Store) PutPlacement(ctx context.Context, p *Placement, expect int64) (int64, error) {
	if err := checkNames(p.Tenant, p.Network); err != nil {
		return 0, err
	}
	p.Placed = time.Now().UTC()
	data, err := json.Marshal(p)
	if err != nil {
		return 0, err
	}
	nkey, pkey := NetworkKey(p.Tenant, p.Network), PlacementKey(p.Tenant, p.Network)
	resp, err := s.cli.Txn(ctx).
		If(s.guard(clientv3.Compare(clientv3.ModRevision(nkey), "=", p.Generation),
			clientv3.Compare(clientv3.ModRevision(pkey), "=", expect))...).
		Then(clientv3.OpPut(pkey, string(data))).
		Else(append([]clientv3.Op{clientv3.OpGet(nkey), clientv3.OpGet(pkey)}, s.fenceGet()...)...).
		Commit()
	if err != nil {
		return 0, unreachable(err, s.cli.Endpoints())
	}
	if !resp.Succeeded {
		if err := s.lostFence(resp); err != nil {
			return 0, err
		}
		nrev := int64(0)
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			nrev = kvs[0].ModRevision
		}
		if nrev != p.Generation {
			return 0, fmt.Errorf("%w: placement of network %s of tenant %s is for generation %d, and the network is now at %d (0: removed)",
				ErrConflict, p.Network, p.Tenant, p.Generation, nrev)
		}
		return 0, fmt.Errorf("%w: placement of network %s of tenant %s was changed by another placer meanwhile", ErrConflict, p.Network, p.Tenant)
	}
	p.Revision = resp.Header.Revision
	return p.Revision, nil
}

// DropPlacement removes placement p of a network that is gone (or that Networks leaves out), if
// the network key has not changed since revision seen (when the caller listed the networks) and
// the placement is still p; otherwise it returns ErrConflict (ErrNotLeader: the fence went).
func (s *Store) DropPlacement(ctx context.Context, p *Placement, seen int64) error {
	nkey, pkey := NetworkKey(p.Tenant, p.Network), PlacementKey(p.Tenant, p.Network)
	resp, err := s.cli.Txn(ctx).
		If(s.guard(clientv3.Compare(clientv3.ModRevision(nkey), "<", seen+1), clientv3.Compare(clientv3.ModRevision(pkey), "=", p.Revision))...).
		Then(clientv3.OpDelete(pkey)).
		Else(s.fenceGet()...).
		Commit()
	if err != nil {
		return unreachable(err, s.cli.Endpoints())
	}
	if !resp.Succeeded {
		if err := s.lostFence(resp); err != nil {
			return err
		}
		return fmt.Errorf("%w: placement of network %s of tenant %s: the network or its placement changed meanwhile", ErrConflict, p.Network, p.Tenant)
	}
	return nil
}

// Placement returns a network's placement, or an error wrapping ErrNotFound.
func (s *Store) Placement(ctx context.Context, tenant, network string) (*Placement, error) {
	if err := checkNames(tenant, network); err != nil {
		return nil, err
	}
	resp, err := s.cli.Get(ctx, PlacementKey(tenant, network))
	if err != nil {
		return nil, unreachable(err, s.cli.Endpoints())
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("%w: placement of network %s of tenant %s", ErrNotFound, network, tenant)
	}
	return DecodePlacement(resp.Kvs[0].Key, resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
}

// Placements lists the placements of every tenant's networks, and the revision they were read
// at (to watch from).
func (s *Store) Placements(ctx context.Context) ([]*Placement, int64, error) {
	resp, err := s.cli.Get(ctx, PlacementsPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, unreachable(err, s.cli.Endpoints())
	}
	var out []*Placement
	for _, kv := range resp.Kvs {
		p, err := DecodePlacement(kv.Key, kv.Value, kv.ModRevision)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, p)
	}
	return out, resp.Header.Revision, nil
}

// DecodePlacement decodes a placement key and value (as a watch delivers them).
func DecodePlacement(key, value []byte, rev int64) (*Placement, error) {
	parts := splitKey(string(key), PlacementsPrefix)
	if len(parts) != 2 {
		return nil, fmt.Errorf("cluster: key %s is not placements/TENANT/NETWORK", key)
	}
	p := &Placement{Tenant: parts[0], Network: parts[1], Revision: rev}
	if value != nil {
		if err := json.Unmarshal(value, p); err != nil {
			return nil, fmt.Errorf("cluster: key %s: %w", key, err)
		}
	}
	return p, nil
}

// OnMachine tells whether the placement puts any node on machine m.
func (p *Placement) OnMachine(m string) bool {
	for _, pm := range p.Nodes {
		if pm == m {
			return true
		}
	}
	return false
}

// WatchPlacements follows every change of every placement after revision rev. A deleted
// placement comes with Nodes nil. The channel closes when ctx ends; an error (etcd compacted
// the history past rev, so the caller must list again) comes as a nil placement with err set.
func (s *Store) WatchPlacements(ctx context.Context, rev int64) <-chan PlacementEvent {
	out := make(chan PlacementEvent)
	wch := s.cli.Watch(clientv3.WithRequireLeader(ctx), PlacementsPrefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	go func() {
		defer close(out)
		for wr := range wch {
			if err := wr.Err(); err != nil {
				select {
				case out <- PlacementEvent{Err: fmt.Errorf("cluster: watching placements: %w", err)}:
				case <-ctx.Done():
				}
				return
			}
			for _, ev := range wr.Events {
				var value []byte
				if ev.Type == clientv3.EventTypePut {
					value = ev.Kv.Value
				}
				p, err := DecodePlacement(ev.Kv.Key, value, ev.Kv.ModRevision)
				select {
				case out <- PlacementEvent{Placement: p, Deleted: ev.Type == clientv3.EventTypeDelete, Err: err}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// PlacementEvent is one change a watch of placements saw.
type PlacementEvent struct {
	Placement *Placement
	Deleted   bool
	Err       error
}
