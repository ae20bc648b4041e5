package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/pki"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Tenants are etcd users (docs/cluster.md, "Tenants"): each certificate of tenant NAME is
// etcd user tenant:NAME:ID (its common name: identity.go), with role tenant:NAME granting that
// tenant's prefixes and nothing else. The administrator is etcd's root.

// ErrDenied: etcd refused the request for this client's user (another tenant's records).
var ErrDenied = errors.New("permission denied")

// ErrTenantExists: a tenant of that name exists already.
var ErrTenantExists = errors.New("tenant exists")

// Tenant is a tenant's record: its quota and certificate, kept at TenantKey (readable by the
// tenant, written only by the administrator).
type Tenant struct {
	Name    string    `json:"-"`
	Quota   Quota     `json:"quota"`
	Created time.Time `json:"created"`
	// User is the etcd user of the tenant's certificate (its common name), and Cert the
	// certificate's fingerprint (pki.Fingerprint): the one certificate the agents and the API
	// take as the tenant's (CheckTenantCert).
	User string `json:"user"`
	Cert string `json:"cert"`
	// Removing: `tenant rm` has begun (RemoveTenant); ups of the tenant are refused.
	Removing bool `json:"removing,omitempty"`
	// Revision is etcd's revision of the record's last change.
	Revision int64 `json:"-"`
}

// AddTenant makes tenant t: a client certificate of the CA for it (a new etcd user of role
// tenant:NAME, which grants its prefixes only), and its record with its quota and the
// certificate's fingerprint; it returns the certificate. It turns etcd's authentication on
// first (EnableAuth). A tenant that exists is refused with ErrTenantExists; the reserved names
// (default, root) with ErrBadName.
func (s *Store) AddTenant(ctx context.Context, t *Tenant, ca *pki.CA, validFor time.Duration) (*pki.Pair, error) {
	if err := checkTenantName(t.Name); err != nil {
		return nil, err
	}
	if err := t.Quota.check(); err != nil {
		return nil, err
	}
	pair, err := issueTenant(t, ca, validFor) // first: a bad CA leaves nothing made
	if err != nil {
		return nil, err
	}
	if err := s.EnableAuth(ctx); err != nil {
		return nil, err
	}
	t.Created = time.Now().UTC()
	data, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	key := TenantKey(t.Name)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(clientv3.OpPut(key, string(data))).Commit()
	if err != nil {
		return nil, unreachable(err, s.cli.Endpoints())
	}
	if !resp.Succeeded {
		return nil, fmt.Errorf("%w: %s; `trellis tenant quota` changes its quota, `trellis tenant rm` removes it", ErrTenantExists, t.Name)
	}
	t.Revision = resp.Header.Revision
	if err := s.addTenantUser(ctx, t); err != nil {
		s.cli.Delete(context.WithoutCancel(ctx), key)
		return nil, err
	}
	return pair, nil
}

// SetQuota changes tenant name's quota. Networks already up stay; ups that would go over the
// new quota are refused.
func (s *Store) SetQuota(ctx context.Context, name string, q Quota) error {
	t, err := s.Tenant(ctx, name)
	if err != nil {
		return err
	}
	if err := q.check(); err != nil {
		return err
	}
	t.Quota = q
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	key := TenantKey(name)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", t.Revision)).Then(clientv3.OpPut(key, string(data))).Commit()
	if err != nil {
		return unreachable(err, s.cli.Endpoints())
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: tenant %s was changed by someone else meanwhile; run it again", ErrConflict, name)
	}
	return nil
}

// Tenant reads tenant name's record, or an error wrapping ErrNotFound.
func (s *Store) Tenant(ctx context.Context, name string) (*Tenant, error) {
	if err := checkName("tenant", name); err != nil {
		return nil, err
	}
	resp, err := s.cli.Get(ctx, TenantKey(name))
	if err != nil {
		return nil, unreachable(err, s.cli.Endpoints())
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("%w: tenant %s (`trellis tenant add` makes one)", ErrNotFound, name)
	}
	return decodeTenant(resp.Kvs[0])
}

func decodeTenant(kv *mvccpb.KeyValue) (*Tenant, error) {
	t := &Tenant{Name: string(kv.Key[len(TenantsPrefix):]), Revision: kv.ModRevision}
	if err := json.Unmarshal(kv.Value, t); err != nil {
		return nil, fmt.Errorf("cluster: key %s: %w", kv.Key, err)
	}
	return t, nil
}

// Tenants lists every tenant, by name (the administrator and agents may; a tenant may not).
func (s *Store) Tenants(ctx context.Context) ([]*Tenant, error) {
	resp, err := s.cli.Get(ctx, TenantsPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, unreachable(err, s.cli.Endpoints())
	}
	var out []*Tenant
	for _, kv := range resp.Kvs {
		t, err := decodeTenant(kv)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// RemoveTenant removes tenant name: its etcd user and role, the agents' grants of its status,
// and its record. Its certificate no longer works, at etcd nor at the agents, nor after a
// tenant of the same name is added again. A tenant that still has networks is refused: bring
// them down first. It first marks the record Removing, in a transaction that fails if a
// network of the tenant was written since they were listed; an up whose transaction comes
// later finds the record changed, reads it again and is refused. What the tenant's own etcd
// client writes under its prefix until its user is gone is removed with the record, so no
// network outlives its tenant.
func (s *Store) RemoveTenant(ctx context.Context, name string) error {
	t, err := s.Tenant(ctx, name)
	if err != nil {
		return err
	}
	if !t.Removing { // else: a removal that stopped half-way, taken up again
		if err := s.markRemoving(ctx, t); err != nil {
			return err
		}
	}
	if err := s.removeTenantUser(ctx, t); err != nil {
		return err
	}
	if _, err := s.cli.Txn(ctx).Then(clientv3.OpDelete(TenantPrefix(NetworksPrefix, name), clientv3.WithPrefix()), clientv3.OpDelete(TenantKey(name))).Commit(); err != nil {
		return unreachable(err, s.cli.Endpoints())
	}
	return nil
}

// markRemoving writes tenant t's record with Removing set, if the record and the tenant's
// networks are as read (none).
func (s *Store) markRemoving(ctx context.Context, t *Tenant) error {
	nets, rev, err := s.Networks(ctx, t.Name)
	if err != nil {
		return err
	}
	if len(nets) > 0 {
		return fmt.Errorf("cluster: tenant %s still has %d networks (%s, ...); bring them down first (trellis down --all with its context)", t.Name, len(nets), nets[0].Name)
	}
	t.Removing = true
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	key := TenantKey(t.Name)
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(key), "=", t.Revision),
		clientv3.Compare(clientv3.ModRevision(TenantPrefix(NetworksPrefix, t.Name)), "<", rev+1).WithPrefix(),
	).Then(clientv3.OpPut(key, string(data))).Commit()
	if err != nil {
		return unreachable(err, s.cli.Endpoints())
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: tenant %s or its networks changed meanwhile (an up?); nothing was removed: run it again", ErrConflict, t.Name)
	}
	return nil
}
