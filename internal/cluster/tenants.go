package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Tenants are etcd users (docs/cluster.md, "Tenants"): tenant NAME is etcd user NAME, whose
// client certificate has common name NAME (etcd's --client-cert-auth takes the user from it),
// with role NAME granting that tenant's prefixes and nothing else. Agents and placers are user
// AgentUser. The administrator is etcd's root.
const (
	RootUser  = "root"
	AgentUser = "trellis-agent"
)

// ErrDenied: etcd refused the request for this client's user (another tenant's records).
var ErrDenied = errors.New("permission denied")

// ErrTenantExists: a tenant of that name exists already.
var ErrTenantExists = errors.New("tenant exists")

// Tenant is a tenant's record: its quota, kept at TenantKey (readable by the tenant, written
// only by the administrator).
type Tenant struct {
	Name    string    `json:"-"`
	Quota   Quota     `json:"quota"`
	Created time.Time `json:"created"`
	// Removing: `tenant rm` has begun (RemoveTenant); ups of the tenant are refused.
	Removing bool `json:"removing,omitempty"`
	// Revision is etcd's revision of the record's last change.
	Revision int64 `json:"-"`
}

// grant is one permission of a role: a key, or every key under a prefix.
type grant struct {
	key    string
	prefix bool
	perm   clientv3.PermissionType
}

// tenantGrants is what tenant t may do: write its networks, read its placements, status and
// record, and read the ping key. Every prefix ends in "/", so tenant "a" never covers "ab".
func tenantGrants(t string) []grant {
	return []grant{
		{TenantPrefix(NetworksPrefix, t), true, clientv3.PermissionType(clientv3.PermReadWrite)},
		{TenantPrefix(PlacementsPrefix, t), true, clientv3.PermissionType(clientv3.PermRead)},
		{TenantPrefix(StatusPrefix, t), true, clientv3.PermissionType(clientv3.PermRead)},
		{TenantKey(t), false, clientv3.PermissionType(clientv3.PermRead)},
		{PingKey, false, clientv3.PermissionType(clientv3.PermRead)},
	}
}

// agentGrants is what agents and placers may do: read every tenant's networks and quotas,
// write placements, status, machines and the placer's election.
func agentGrants() []grant {
	r, rw := clientv3.PermissionType(clientv3.PermRead), clientv3.PermissionType(clientv3.PermReadWrite)
	return []grant{
		{NetworksPrefix, true, r}, {TenantsPrefix, true, r}, {PingKey, false, r},
		{PlacementsPrefix, true, rw}, {StatusPrefix, true, rw}, {MachinesPrefix, true, rw}, {ElectionPrefix, true, rw},
	}
}

// EnableAuth turns on etcd's authentication if it is off: it makes the root user (the
// administrator, whose certificate has common name root) and the agents' user and role, then
// enables auth. From then on, every client is the user its certificate names, and may only do
// what that user's roles grant. Safe to call again.
func (s *Store) EnableAuth(ctx context.Context) error {
	st, err := s.cli.AuthStatus(ctx)
	if err != nil {
		return unreachable(err, s.cli.Endpoints())
	}
	if err := s.ensureUser(ctx, RootUser, RootUser, nil); err != nil {
		return err
	}
	if err := s.ensureUser(ctx, AgentUser, AgentUser, agentGrants()); err != nil {
		return err
	}
	if st.Enabled {
		return nil
	}
	if _, err := s.cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("cluster: enabling etcd's authentication: %w", err)
	}
	return nil
}

// ensureUser makes user name (no password: it authenticates with its certificate) with role
// (made with grants unless it is etcd's root role), if they do not exist.
func (s *Store) ensureUser(ctx context.Context, name, role string, grants []grant) error {
	if role != RootUser {
		if _, err := s.cli.RoleAdd(ctx, role); err != nil && !errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
			return fmt.Errorf("cluster: role %s: %w", role, unreachable(err, s.cli.Endpoints()))
		}
		for _, g := range grants {
			end := ""
			if g.prefix {
				end = clientv3.GetPrefixRangeEnd(g.key)
			}
			if _, err := s.cli.RoleGrantPermission(ctx, role, g.key, end, g.perm); err != nil {
				return fmt.Errorf("cluster: role %s: granting %s: %w", role, g.key, unreachable(err, s.cli.Endpoints()))
			}
		}
	}
	_, err := s.cli.UserAddWithOptions(ctx, name, "", &clientv3.UserAddOptions{NoPassword: true})
	if err != nil && !errors.Is(err, rpctypes.ErrUserAlreadyExist) {
		return fmt.Errorf("cluster: user %s: %w", name, unreachable(err, s.cli.Endpoints()))
	}
	if _, err := s.cli.UserGrantRole(ctx, name, role); err != nil {
		return fmt.Errorf("cluster: user %s: role %s: %w", name, role, unreachable(err, s.cli.Endpoints()))
	}
	return nil
}

// AddTenant makes tenant t: its etcd user and role (granting its prefixes only) and its record
// with its quota. It turns etcd's authentication on first (EnableAuth). A tenant that exists is
// refused with ErrTenantExists; names of etcd's root and of the agents are refused.
func (s *Store) AddTenant(ctx context.Context, t *Tenant) error {
	if err := checkName("tenant", t.Name); err != nil {
		return err
	}
	if t.Name == RootUser || t.Name == AgentUser {
		return fmt.Errorf("%w: tenant %q: the name is etcd's administrator's or the agents'; choose another", ErrBadName, t.Name)
	}
	if err := t.Quota.check(); err != nil {
		return err
	}
	if err := s.EnableAuth(ctx); err != nil {
		return err
	}
	t.Created = time.Now().UTC()
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	key := TenantKey(t.Name)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(clientv3.OpPut(key, string(data))).Commit()
	if err != nil {
		return unreachable(err, s.cli.Endpoints())
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %s; `trellis tenant quota` changes its quota, `trellis tenant rm` removes it", ErrTenantExists, t.Name)
	}
	t.Revision = resp.Header.Revision
	if err := s.ensureUser(ctx, t.Name, t.Name, tenantGrants(t.Name)); err != nil {
		s.cli.Delete(context.WithoutCancel(ctx), key)
		return err
	}
	return nil
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

// RemoveTenant removes tenant name: its record, etcd user and role. Certificates issued for it
// no longer work. A tenant that still has networks is refused: bring them down first. It first
// marks the record Removing, in a transaction that fails if a network of the tenant was written
// since they were listed; an up whose transaction comes later finds the record changed, reads
// it again and is refused. What the tenant's own etcd client writes under its prefix until its
// user is gone is removed with the record, so no network outlives its tenant.
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
	if _, err := s.cli.UserDelete(ctx, name); err != nil && !errors.Is(err, rpctypes.ErrUserNotFound) {
		return fmt.Errorf("cluster: user %s: %w", name, unreachable(err, s.cli.Endpoints()))
	}
	if _, err := s.cli.RoleDelete(ctx, name); err != nil && !errors.Is(err, rpctypes.ErrRoleNotFound) {
		return fmt.Errorf("cluster: role %s: %w", name, unreachable(err, s.cli.Endpoints()))
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
