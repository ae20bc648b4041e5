package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/trellisnet/trellis/internal/spec"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrOverQuota: the tenant's networks would take more than its quota.
var ErrOverQuota = errors.New("over quota")

// ErrNotGranted: the network has a setting that the tenant's quota does not grant.
var ErrNotGranted = errors.New("not granted")

// Quota limits what a tenant's networks take together (zero: not limited), and grants the
// settings that reach past a tenant's own nodes (false: refused).
type Quota struct {
	Nodes  int     `json:"nodes,omitempty"`
	CPUs   float64 `json:"cpus,omitempty"`   // cores: the sum of the nodes' `cpu`
	Memory uint64  `json:"memory,omitempty"` // bytes: the sum of the nodes' memory limits (spec.Node.MemoryLimit)
	Pids   int64   `json:"pids,omitempty"`   // the sum of the nodes' process limits
	// Realtime grants real-time scheduling, which can starve every other process of a core: a
	// VM's `priority` (SCHED_FIFO) and `reserve` (SCHED_DEADLINE, or a quota on pinned vCPUs).
	Realtime bool `json:"realtime,omitempty"`
	// Pin grants naming a machine's cores: a VM's `pin`, a node's `cpuset`, an engine's `cpus`
	// as CPU numbers.
	Pin bool `json:"pin,omitempty"`
}

func (q Quota) check() error {
	if q.Nodes < 0 || q.CPUs < 0 || q.Pids < 0 {
		return fmt.Errorf("cluster: quota %+v: nodes, cpus and pids must not be negative (0: not limited)", q)
	}
	return nil
}

// UsageOf is what network sn (as spec.ParseCluster read it: every node has its limits) takes:
// its nodes, and the cpu, memory and processes they may use.
func UsageOf(sn *spec.Network) Quota {
	u := Quota{Nodes: len(sn.Nodes)}
	for _, nd := range sn.Nodes {
		u.CPUs += nd.Needs.CPU
		u.Memory += nd.MemoryLimit()
		u.Pids += nd.Pids
	}
	return u
}

// Add is the use q and o together (their grants: q's).
func (q Quota) Add(o Quota) Quota {
	q.Nodes, q.CPUs, q.Memory, q.Pids = q.Nodes+o.Nodes, q.CPUs+o.CPUs, q.Memory+o.Memory, q.Pids+o.Pids
	return q
}

// Over says which limits of q use goes over ("nodes: 12, quota 10"), or "" if none.
func (q Quota) Over(use Quota) string {
	var over []string
	if q.Nodes > 0 && use.Nodes > q.Nodes {
		over = append(over, fmt.Sprintf("nodes: %d, quota %d", use.Nodes, q.Nodes))
	}
	if q.CPUs > 0 && use.CPUs > q.CPUs+1e-9 {
		over = append(over, fmt.Sprintf("cpus: %g, quota %g", use.CPUs, q.CPUs))
	}
	if q.Memory > 0 && use.Memory > q.Memory {
		over = append(over, fmt.Sprintf("memory: %d bytes, quota %d", use.Memory, q.Memory))
	}
	if q.Pids > 0 && use.Pids > q.Pids {
		over = append(over, fmt.Sprintf("pids: %d, quota %d", use.Pids, q.Pids))
	}
	return strings.Join(over, "; ")
}

// String is the quota as `trellis tenant ls` shows it.
func (q Quota) String() string {
	f := func(set bool, s string) string {
		if !set {
			return "-"
		}
		return s
	}
	s := fmt.Sprintf("nodes %s, cpus %s, memory %s, pids %s", f(q.Nodes > 0, fmt.Sprint(q.Nodes)), f(q.CPUs > 0, fmt.Sprintf("%g", q.CPUs)),
		f(q.Memory > 0, fmt.Sprintf("%dM", q.Memory>>20)), f(q.Pids > 0, fmt.Sprint(q.Pids)))
	if q.Realtime {
		s += ", realtime"
	}
	if q.Pin {
		s += ", pin"
	}
	return s
}

// Spec parses the network's stored file (spec.ParseCluster), with the files its `source:`
// lines name from the record.
func (n *Network) Spec() (*spec.Network, error) {
	read := func(p string) ([]byte, error) {
		if s, ok := n.Sources[p]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	return spec.ParseCluster(n.File, []byte(n.Source), read)
}

// Usage is what the tenant's networks take together, but for network except, and the
// revision it was read at.
func (s *Store) Usage(ctx context.Context, tenant, except string) (Quota, int64, error) {
	nets, rev, err := s.Networks(ctx, tenant)
	if err != nil {
		return Quota{}, 0, err
	}
	var use Quota
	for _, o := range nets {
		if o.Name == except {
			continue
		}
		if sn, err := o.Spec(); err == nil { // one that does not parse is refused by the placer: it takes nothing
			use = use.Add(UsageOf(sn))
		}
	}
	return use, rev, nil
}

// quotaGuard checks that network n keeps its tenant within its quota, and returns the
// comparisons that make the up's transaction fail if the quota or the tenant's other networks
// change before it commits (so two ups that each fit alone cannot together go over).
func (s *Store) quotaGuard(ctx context.Context, n *Network) ([]clientv3.Cmp, error) {
	tkey := TenantKey(n.Tenant)
	t, err := s.Tenant(ctx, n.Tenant)
	if errors.Is(err, ErrNotFound) {
		return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(tkey), "=", 0)}, nil
	}
	if err != nil {
		return nil, err
	}
	if t.Removing {
		return nil, fmt.Errorf("%w: tenant %s is being removed (trellis tenant rm); nothing was changed", ErrConflict, n.Tenant)
	}
	use, rev, err := s.Usage(ctx, n.Tenant, n.Name)
	if err != nil {
		return nil, err
	}
	sn, err := n.Spec()
	if err != nil {
		return nil, err
	}
	if why := t.Quota.Refuses(sn); why != "" {
		return nil, fmt.Errorf("%w: tenant %s with network %s: %s; nothing was changed", ErrNotGranted, n.Tenant, n.Name, why)
	}
	if over := t.Quota.Over(use.Add(UsageOf(sn))); over != "" {
		return nil, fmt.Errorf("%w: tenant %s with network %s: %s; nothing was changed (bring a network down, or ask the administrator: trellis tenant quota)",
			ErrOverQuota, n.Tenant, n.Name, over)
	}
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(tkey), "=", t.Revision),
		clientv3.Compare(clientv3.ModRevision(TenantPrefix(NetworksPrefix, n.Tenant)), "<", rev+1).WithPrefix(),
	}, nil
}
