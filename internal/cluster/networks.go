package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Network is a tenant's desired network: the topology file as `trellis up --cluster` read it.
// Every agent parses the same text, so every machine plans from the same network.
type Network struct {
	Name   string `json:"name"`
	Tenant string `json:"-"`      // from the key
	File   string `json:"file"`   // the file's path where up ran, for messages
	Source string `json:"source"` // the file's text
	// Sources holds the files the topology's `source:` lines name, by the path as written.
	Sources map[string]string `json:"sources,omitempty"`
	Updated time.Time         `json:"updated"`
	// Revision is etcd's revision of the last change of the key: the network's generation.
	// Placements and status name the generation they are for.
	Revision int64 `json:"-"`
}

// Up writes network n of tenant n.Tenant if its key is still as the caller read it: absent when
// expect is 0, else changed last at revision expect. Two ups that read the same revision race
// in one etcd transaction each; one wins, the other gets ErrConflict and changes nothing.
// A tenant with a quota (AddTenant) is kept within it in the same transaction: an up that would
// go over gets ErrOverQuota and changes nothing. It returns the network's new revision.
func (s *Store) Up(ctx context.Context, n *Network, expect int64) (int64, error) {
	if err := checkNames(n.Tenant, n.Name); err != nil {
		return 0, err
	}
	key := NetworkKey(n.Tenant, n.Name)
	for try := 0; ; try++ {
		guard, err := s.quotaGuard(ctx, n)
		if err != nil {
			return 0, err
		}
		n.Updated = time.Now().UTC()
		data, err := json.Marshal(n)
		if err != nil {
			return 0, err
		}
		cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", expect)}, guard...)
		resp, err := s.txnOnce(ctx, key, string(data), func(ctx context.Context) clientv3.Txn {
			return s.cli.Txn(ctx).If(cmps...).Then(clientv3.OpPut(key, string(data))).Else(clientv3.OpGet(key))
		})
		if err != nil {
			return 0, unreachable(err, s.cli.Endpoints())
		}
		if resp.Succeeded {
			n.Revision = resp.Header.Revision
			return n.Revision, nil
		}
		if modRevision(resp) != expect {
			return 0, conflict("network", n.Tenant, n.Name, expect, resp)
		}
		// The network is as read, but the tenant's quota or another of its networks changed
		// meanwhile: check the quota again.
		if try == 4 {
			return 0, fmt.Errorf("%w: the networks or quota of tenant %s kept changing meanwhile; run up again", ErrConflict, n.Tenant)
		}
	}
}

// modRevision is the mod revision of the key a transaction's Else read (0: absent).
func modRevision(resp *clientv3.TxnResponse) int64 {
	if rr := resp.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
		return rr.Kvs[0].ModRevision
	}
	return 0
}

// conflict describes a transaction that lost: what the key holds now, against what was read.
func conflict(what, tenant, name string, expect int64, resp *clientv3.TxnResponse) error {
	now := modRevision(resp)
	switch {
	case expect == 0:
		return fmt.Errorf("%w: %s %s of tenant %s was created by someone else meanwhile (revision %d); run `trellis diff` and up again", ErrConflict, what, name, tenant, now)
	case now == 0:
		return fmt.Errorf("%w: %s %s of tenant %s was removed meanwhile; run up again to create it", ErrConflict, what, name, tenant)
	}
	return fmt.Errorf("%w: %s %s of tenant %s was changed by someone else meanwhile (revision %d, not %d); run `trellis diff` and up again", ErrConflict, what, name, tenant, now, expect)
}

// Network returns a tenant's desired network, or an error wrapping ErrNotFound.
func (s *Store) Network(ctx context.Context, tenant, name string) (*Network, error) {
	if err := checkNames(tenant, name); err != nil {
		return nil, err
	}
	resp, err := s.cli.Get(ctx, NetworkKey(tenant, name))
	if err != nil {
		return nil, unreachable(err, s.cli.Endpoints())
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("%w: network %s of tenant %s", ErrNotFound, name, tenant)
	}
	return decodeNetwork(resp.Kvs[0].Key, resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
}

// Networks lists the desired networks of a tenant ("" for every tenant), by tenant and name,
// and the revision of the store they were read at. A record that Up cannot have written (a key
// of more parts or a bad name, or a value that is not a network: a tenant's client may write
// anything under its prefix) is left out, so it cannot stop the placer or the agents.
func (s *Store) Networks(ctx context.Context, tenant string) ([]*Network, int64, error) {
	prefix := NetworksPrefix
	if tenant != "" {
		prefix = TenantPrefix(NetworksPrefix, tenant)
	}
	resp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, unreachable(err, s.cli.Endpoints())
	}
	var out []*Network
	for _, kv := range resp.Kvs {
		if n, err := decodeNetwork(kv.Key, kv.Value, kv.ModRevision); err == nil {
			out = append(out, n)
		}
	}
	return out, resp.Header.Revision, nil
}

func decodeNetwork(key, value []byte, rev int64) (*Network, error) {
	var n Network
	if err := json.Unmarshal(value, &n); err != nil {
		return nil, fmt.Errorf("cluster: key %s: %w", key, err)
	}
	parts := splitKey(string(key), NetworksPrefix)
	if len(parts) != 2 || checkNames(parts[0], parts[1]) != nil {
		return nil, fmt.Errorf("cluster: key %s is not networks/TENANT/NETWORK", key)
	}
	n.Tenant, n.Name, n.Revision = parts[0], parts[1], rev
	return &n, nil
}

// Down removes a tenant's network from the desired state if it is still at revision expect (0:
// whatever it is). The placer then removes its placement (DropPlacement; a tenant may not write
// placements), and the agents take the network's part on their machines down.
func (s *Store) Down(ctx context.Context, tenant, name string, expect int64) error {
	if err := checkNames(tenant, name); err != nil {
		return err
	}
	key := NetworkKey(tenant, name)
	cmp := clientv3.Compare(clientv3.CreateRevision(key), ">", 0)
	if expect != 0 {
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", expect)
	}
	resp, err := s.cli.Txn(ctx).
		If(cmp).
		Then(clientv3.OpDelete(key)).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return unreachable(err, s.cli.Endpoints())
	}
	if resp.Succeeded {
		return nil
	}
	if rr := resp.Responses[0].GetResponseRange(); rr == nil || len(rr.Kvs) == 0 {
		return fmt.Errorf("%w: network %s of tenant %s", ErrNotFound, name, tenant)
	}
	return conflict("network", tenant, name, expect, resp)
}
