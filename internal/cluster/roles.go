package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/trellisnet/trellis/internal/cluster/pki"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The etcd roles of the cluster (docs/cluster.md, "Certificates"), each granting one identity
// only the prefixes it works on:
//
//   - tenant:NAME: read and write networks/NAME/; read placements/NAME/, status/NAME/,
//     tenants/NAME and ping;
//   - placer: read networks/, tenants/, machines/ and ping; write placements/, election/;
//   - agents (every agent): read networks/, placements/, tenants/ and ping;
//   - agent:MACHINE (that agent alone): write machines/MACHINE, and status/TENANT/MACHINE/ of
//     every tenant (and of default, the administrator's own networks). `trellis tenant add`
//     grants each agent's role the new tenant's, `trellis machine add` every tenant's.

var (
	permRead      = clientv3.PermissionType(clientv3.PermRead)
	permReadWrite = clientv3.PermissionType(clientv3.PermReadWrite)
)

// grant is one permission of a role: a key, or every key under a prefix.
type grant struct {
	key    string
	prefix bool
	perm   clientv3.PermissionType
}

func (g grant) end() string {
	if g.prefix {
		return clientv3.GetPrefixRangeEnd(g.key)
	}
	return ""
}

// tenantGrants is what tenant t may do: write its networks, read its placements, status and
// record, and read the ping key. Every prefix ends in "/", so tenant "a" never covers "ab".
func tenantGrants(t string) []grant {
	return []grant{
		{TenantPrefix(NetworksPrefix, t), true, permReadWrite},
		{TenantPrefix(PlacementsPrefix, t), true, permRead},
		{TenantPrefix(StatusPrefix, t), true, permRead},
		{TenantKey(t), false, permRead},
		{PingKey, false, permRead},
	}
}

// placerGrants is what placers may do: read the networks, quotas and machines, write the
// placements and the leader election.
func placerGrants() []grant {
	return []grant{
		{NetworksPrefix, true, permRead}, {TenantsPrefix, true, permRead}, {MachinesPrefix, true, permRead}, {PingKey, false, permRead},
		{PlacementsPrefix, true, permReadWrite}, {ElectionPrefix, true, permReadWrite},
	}
}

// agentsGrants is what every agent reads: the networks, their placements, the tenants'
// records (to check a tenant's certificate) and ping.
func agentsGrants() []grant {
	return []grant{{NetworksPrefix, true, permRead}, {PlacementsPrefix, true, permRead}, {TenantsPrefix, true, permRead}, {PingKey, false, permRead}}
}

// agentGrants is what machine's agent alone writes: its registration, and its reports of the
// networks of tenants (each tenant's status/TENANT/MACHINE/).
func agentGrants(machine string, tenants []string) []grant {
	out := []grant{{MachineKey(machine), false, permReadWrite}}
	for _, t := range tenants {
		out = append(out, statusGrant(t, machine))
	}
	return out
}

// statusGrant lets machine's agent write its reports of tenant's networks.
func statusGrant(tenant, machine string) grant {
	return grant{StatusMachinePrefix(tenant, machine), true, permReadWrite}
}

// EnableAuth turns on etcd's authentication if it is off: it makes the root user (the
// administrator, whose certificate has common name root), the placers' user and role and the
// agents' common role, then enables auth. From then on, every client is the user its
// certificate names, and may only do what that user's roles grant. Safe to call again.
func (s *Store) EnableAuth(ctx context.Context) error {
	st, err := s.cli.AuthStatus(ctx)
	if err != nil {
		return unreachable(err, s.cli.Endpoints())
	}
	if err := s.ensureUser(ctx, RootUser, RootUser); err != nil {
		return err
	}
	if err := s.ensureRole(ctx, PlacerUser, placerGrants()); err != nil {
		return err
	}
	if err := s.ensureUser(ctx, PlacerUser, PlacerUser); err != nil {
		return err
	}
	if err := s.ensureRole(ctx, AgentsRole, agentsGrants()); err != nil {
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

// ensureRole makes role (if it does not exist) and grants it grants.
func (s *Store) ensureRole(ctx context.Context, role string, grants []grant) error {
	if _, err := s.cli.RoleAdd(ctx, role); err != nil && !errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
		return fmt.Errorf("cluster: role %s: %w", role, unreachable(err, s.cli.Endpoints()))
	}
	for _, g := range grants {
		if _, err := s.cli.RoleGrantPermission(ctx, role, g.key, g.end(), g.perm); err != nil {
			return fmt.Errorf("cluster: role %s: granting %s: %w", role, g.key, unreachable(err, s.cli.Endpoints()))
		}
	}
	return nil
}

// ensureUser makes user name (no password: it authenticates with its certificate), if it does
// not exist, and gives it roles.
func (s *Store) ensureUser(ctx context.Context, name string, roles ...string) error {
	_, err := s.cli.UserAddWithOptions(ctx, name, "", &clientv3.UserAddOptions{NoPassword: true})
	if err != nil && !errors.Is(err, rpctypes.ErrUserAlreadyExist) {
		return fmt.Errorf("cluster: user %s: %w", name, unreachable(err, s.cli.Endpoints()))
	}
	for _, role := range roles {
		if _, err := s.cli.UserGrantRole(ctx, name, role); err != nil {
			return fmt.Errorf("cluster: user %s: role %s: %w", name, role, unreachable(err, s.cli.Endpoints()))
		}
	}
	return nil
}

// agentMachines lists the machines that have an agent's role (`trellis machine add`).
func (s *Store) agentMachines(ctx context.Context) ([]string, error) {
	resp, err := s.cli.RoleList(ctx)
	if err != nil {
		return nil, unreachable(err, s.cli.Endpoints())
	}
	var out []string
	for _, r := range resp.Roles {
		if m, ok := strings.CutPrefix(r, agentPrefix); ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// addTenantUser makes tenant t's role and the user of its certificate, and grants every
// agent's role the tenant's status on its machine.
func (s *Store) addTenantUser(ctx context.Context, t *Tenant) error {
	if err := s.ensureRole(ctx, tenantRole(t.Name), tenantGrants(t.Name)); err != nil {
		return err
	}
	if err := s.ensureUser(ctx, t.User, tenantRole(t.Name)); err != nil {
		return err
	}
	machines, err := s.agentMachines(ctx)
	if err != nil {
		return err
	}
	for _, m := range machines {
		if err := s.ensureRole(ctx, agentRole(m), []grant{statusGrant(t.Name, m)}); err != nil {
			return err
		}
	}
	return nil
}

// removeTenantUser deletes the user of tenant t's certificate and its role, and revokes the
// agents' grants of its status.
func (s *Store) removeTenantUser(ctx context.Context, t *Tenant) error {
	user := t.User
	if user == "" {
		user = t.Name // a record of before tenant:NAME:ID users (docs/cluster.md: re-issue)
	}
	if _, err := s.cli.UserDelete(ctx, user); err != nil && !errors.Is(err, rpctypes.ErrUserNotFound) {
		return fmt.Errorf("cluster: user %s: %w", user, unreachable(err, s.cli.Endpoints()))
	}
	if _, err := s.cli.RoleDelete(ctx, tenantRole(t.Name)); err != nil && !errors.Is(err, rpctypes.ErrRoleNotFound) {
		return fmt.Errorf("cluster: role %s: %w", tenantRole(t.Name), unreachable(err, s.cli.Endpoints()))
	}
	machines, err := s.agentMachines(ctx)
	if err != nil {
		return err
	}
	for _, m := range machines {
		g := statusGrant(t.Name, m)
		_, err := s.cli.RoleRevokePermission(ctx, agentRole(m), g.key, g.end())
		if err != nil && !errors.Is(err, rpctypes.ErrPermissionNotGranted) {
			return fmt.Errorf("cluster: role %s: revoking %s: %w", agentRole(m), g.key, unreachable(err, s.cli.Endpoints()))
		}
	}
	return nil
}

// AddAgent makes the etcd user of machine's agent (common name agent:MACHINE, see AgentUser)
// with the agents' role and its own, which writes only machine's registration and reports;
// with placer, also the placers' role (for `trellis agent --placer`). It turns etcd's
// authentication on first. Adding a machine again gives it the placers' role if asked (it takes
// none away).
func (s *Store) AddAgent(ctx context.Context, machine string, placer bool) error {
	if err := checkName("machine", machine); err != nil {
		return err
	}
	if err := s.EnableAuth(ctx); err != nil {
		return err
	}
	tenants := []string{DefaultTenant}
	ts, err := s.Tenants(ctx)
	if err != nil {
		return err
	}
	for _, t := range ts {
		tenants = append(tenants, t.Name)
	}
	if err := s.ensureRole(ctx, agentRole(machine), agentGrants(machine, tenants)); err != nil {
		return err
	}
	roles := []string{AgentsRole, agentRole(machine)}
	if placer {
		roles = append(roles, PlacerUser)
	}
	return s.ensureUser(ctx, AgentUser(machine), roles...)
}

// RemoveAgent deletes the etcd user and role of machine's agent: its certificate works no more,
// and its registration goes when its lease runs out (it can no longer renew it).
func (s *Store) RemoveAgent(ctx context.Context, machine string) error {
	if err := checkName("machine", machine); err != nil {
		return err
	}
	if _, err := s.cli.UserDelete(ctx, AgentUser(machine)); err != nil {
		if errors.Is(err, rpctypes.ErrUserNotFound) {
			return fmt.Errorf("%w: machine %s has no agent's user (`trellis machine add` makes one)", ErrNotFound, machine)
		}
		return fmt.Errorf("cluster: user %s: %w", AgentUser(machine), unreachable(err, s.cli.Endpoints()))
	}
	if _, err := s.cli.RoleDelete(ctx, agentRole(machine)); err != nil && !errors.Is(err, rpctypes.ErrRoleNotFound) {
		return fmt.Errorf("cluster: role %s: %w", agentRole(machine), unreachable(err, s.cli.Endpoints()))
	}
	return nil
}

// issueTenant makes a certificate of ca for tenant t, of a new etcd user, and records its user
// and fingerprint in t.
func issueTenant(t *Tenant, ca *pki.CA, validFor time.Duration) (*pki.Pair, error) {
	user, err := newTenantUser(t.Name)
	if err != nil {
		return nil, err
	}
	pair, err := ca.Issue(user, pki.Client, nil, validFor)
	if err != nil {
		return nil, err
	}
	cert, err := pair.Certificate()
	if err != nil {
		return nil, err
	}
	t.User, t.Cert = user, pki.Fingerprint(cert)
	return pair, nil
}

// reservedTenants are names no tenant may have: default holds the administrator's own
// networks (a context file without tenant:), root is the administrator.
var reservedTenants = map[string]string{
	DefaultTenant: "holds the administrator's own networks (a context file without tenant:)",
	RootUser:      "is the administrator's",
}

// checkTenantName refuses a name that cannot be a tenant's.
func checkTenantName(name string) error {
	if err := checkName("tenant", name); err != nil {
		return err
	}
	if why, ok := reservedTenants[name]; ok {
		return fmt.Errorf("%w: tenant %q: the name is reserved: it %s; choose another", ErrBadName, name, why)
	}
	return nil
}
