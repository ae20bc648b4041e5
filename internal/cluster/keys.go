package cluster

import "strings"

// The key layout (docs/cluster.md). Each kind of record has a prefix of its own, so that one
// etcd role can grant exactly one kind (a tenant: its networks to write, its placements and
// status to read; an agent: placements to read, its own machine and its own reports to
// write), and one watch follows one kind.
const (
	Prefix           = "/trellis/v1/"
	NetworksPrefix   = Prefix + "networks/"   // networks/TENANT/NETWORK: the desired network
	PlacementsPrefix = Prefix + "placements/" // placements/TENANT/NETWORK: node -> machine
	StatusPrefix     = Prefix + "status/"     // status/TENANT/MACHINE/NETWORK: an agent's report
	MachinesPrefix   = Prefix + "machines/"   // machines/MACHINE: a registration, with a lease
	ElectionPrefix   = Prefix + "election/"   // election/placer: the placer's leader election
	TenantsPrefix    = Prefix + "tenants/"    // tenants/TENANT: the tenant's quota (admin only)
	PingKey          = Prefix + "ping"        // read by Ping: every user may
)

// NetworkKey is the key of a tenant's desired network.
func NetworkKey(tenant, network string) string { return NetworksPrefix + tenant + "/" + network }

// PlacementKey is the key of a tenant's network's placement.
func PlacementKey(tenant, network string) string {
	return PlacementsPrefix + tenant + "/" + network
}

// StatusKey is the key of what machine reports of a tenant's network. The machine comes before
// the network, so that one grant (StatusMachinePrefix) lets a machine's agent write its own
// reports of a tenant's networks and no other machine's.
func StatusKey(tenant, network, machine string) string {
	return StatusMachinePrefix(tenant, machine) + network
}

// StatusMachinePrefix is the prefix of machine's reports of tenant's networks.
func StatusMachinePrefix(tenant, machine string) string {
	return StatusPrefix + tenant + "/" + machine + "/"
}

// TenantKey is the key of a tenant's record (its quota).
func TenantKey(tenant string) string { return TenantsPrefix + tenant }

// MachineKey is the key of a machine's registration.
func MachineKey(machine string) string { return MachinesPrefix + machine }

// TenantPrefix is the prefix of one tenant's records of one kind (NetworksPrefix, ...), with the
// trailing slash, so that tenant "a" never covers tenant "ab".
func TenantPrefix(kind, tenant string) string { return kind + tenant + "/" }

// splitKey returns the parts of key after prefix: tenant and network (machine and network for
// status).
func splitKey(key, prefix string) []string {
	return strings.Split(strings.TrimPrefix(key, prefix), "/")
}
