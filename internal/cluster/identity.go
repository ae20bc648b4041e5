package cluster

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/trellisnet/trellis/internal/cluster/pki"
)

// Who a client of the cluster is (docs/cluster.md, "Certificates"): etcd's --client-cert-auth
// takes a client's user from its certificate's common name, and the agents and the API take it
// the same way. Each kind of identity has common names of its own, so that no certificate
// issued for one can be another's:
//
//   - root: the administrator (etcd's root user);
//   - placer: placers;
//   - agent:MACHINE: the agent of machine MACHINE (`trellis machine add`);
//   - tenant:NAME:ID: tenant NAME, one user per certificate `trellis tenant add` issued, so
//     that a tenant removed and added again does not take its old certificate back.
//
// Certificates of etcd members and of servers (--hosts) are no clients at all.
const (
	RootUser   = "root"
	PlacerUser = "placer"
	// AgentsRole grants what every agent reads; each agent's own role, what it writes.
	AgentsRole   = "agents"
	agentPrefix  = "agent:"
	tenantPrefix = "tenant:"
)

// ErrRevoked: a tenant's certificate that is not the one the cluster records for the tenant
// (the tenant was removed, or removed and added again since it was issued).
var ErrRevoked = errors.New("certificate revoked")

// Kind is the kind of an identity.
type Kind int

const (
	KindOther  Kind = iota // no identity of the cluster's: refused everywhere
	KindAdmin              // root
	KindPlacer             // placer
	KindAgent              // agent:MACHINE
	KindTenant             // tenant:NAME:ID
)

// Identity is who a certificate's common name says its holder is.
type Identity struct {
	Kind Kind
	Name string // the machine of an agent, the tenant of a tenant
}

// AgentUser is the etcd user (and common name) of machine's agent.
func AgentUser(machine string) string { return agentPrefix + machine }

// agentRole is the etcd role of what machine's agent alone may write.
func agentRole(machine string) string { return agentPrefix + machine }

// tenantRole is the etcd role of tenant t; each of its certificates' users has it.
func tenantRole(t string) string { return tenantPrefix + t }

// newTenantUser is a new etcd user (and common name) for a certificate of tenant t.
func newTenantUser(t string) (string, error) {
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return "", err
	}
	return tenantPrefix + t + ":" + hex.EncodeToString(id), nil
}

// ParseIdentity says whose a common name is.
func ParseIdentity(cn string) Identity {
	switch {
	case cn == RootUser:
		return Identity{Kind: KindAdmin}
	case cn == PlacerUser:
		return Identity{Kind: KindPlacer}
	case strings.HasPrefix(cn, agentPrefix) && nameRE.MatchString(cn[len(agentPrefix):]):
		return Identity{Kind: KindAgent, Name: cn[len(agentPrefix):]}
	case strings.HasPrefix(cn, tenantPrefix):
		name, id, ok := strings.Cut(cn[len(tenantPrefix):], ":")
		if ok && nameRE.MatchString(name) && id != "" {
			return Identity{Kind: KindTenant, Name: name}
		}
	}
	return Identity{Kind: KindOther}
}

// ReservedPrefix tells whether a common name is of a kind that only `trellis tenant add` and
// `trellis machine add` issue (with the etcd user that goes with it), and returns the command.
func ReservedPrefix(cn string) (string, bool) {
	switch {
	case strings.HasPrefix(cn, tenantPrefix):
		return "trellis tenant add", true
	case strings.HasPrefix(cn, agentPrefix):
		return "trellis machine add", true
	}
	return "", false
}

// CheckTenantCert checks that cert (a client's, verified against the cluster's CA) is the one
// the cluster records for tenant name: the tenant exists, and its record holds the
// certificate's fingerprint. Otherwise it returns an error wrapping ErrRevoked (or the store's
// error). The agents and the API call it for every request of a tenant: etcd itself refuses a
// removed tenant's user, and this refuses it where etcd is not asked.
func (s *Store) CheckTenantCert(ctx context.Context, name string, cert *x509.Certificate) error {
	t, err := s.Tenant(ctx, name)
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrBadName) {
		return fmt.Errorf("%w: tenant %s is no tenant of the cluster (removed?)", ErrRevoked, name)
	}
	if err != nil {
		return err
	}
	if t.Cert != pki.Fingerprint(cert) || t.User != cert.Subject.CommonName {
		return fmt.Errorf("%w: this certificate of tenant %s is not the one the cluster holds for it (the tenant was removed and added again since it was issued); use the certificate of its last `trellis tenant add`", ErrRevoked, name)
	}
	return nil
}
