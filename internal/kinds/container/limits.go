package container

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/trellisnet/trellis/internal/cgroup"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// A container node's limits are its file's `cpu` and `memory` (the figures placement counts,
// enforced here: decision 2 says placement counts the same numbers), `cpuset` and `pids`.

var hierarchy = sync.OnceValues(cgroup.Detect)

// groupName names node's control group: the state directory, the network and the node, so that
// the groups of a network are found by their prefix (groupPrefix).
func groupName(env *kinds.Env, node string) string { return groupPrefix(env) + node }

func groupPrefix(env *kinds.Env) string { return env.Store.ID + "." + env.Plan.NetID + "." }

// limits are the cgroup limits of node nd.
func limits(nd *spec.Node) cgroup.Limits {
	return cgroup.Limits{CPUs: nd.Needs.CPU, Memory: nd.MemoryLimit(), Cpuset: nd.Cpuset, Pids: nd.Pids}
}

// minMemory is the least memory a node may be given: its init and a shell.
const minMemory = 8 << 20

// check refuses, when the file is read, limits this machine cannot honour. A network over
// several machines is checked on each machine when its nodes start.
func check(n *spec.Network, nd *spec.Node) []*spec.Error {
	var errs []*spec.Error
	if nd.Needs.Memory != 0 && nd.Needs.Memory < minMemory {
		errs = append(errs, n.NodeError(nd, "memory", fmt.Sprintf("%d bytes is too little for a node", nd.Needs.Memory), "give at least 8M"))
	}
	if len(n.Hosts) > 0 {
		return errs
	}
	if err := cgroup.Check(cgroup.Limits{CPUs: nd.Needs.CPU}); err != nil {
		errs = append(errs, n.NodeError(nd, "cpu", strings.TrimPrefix(err.Error(), cgroup.ErrLimit.Error()+": "), "give at most the machine's cores"))
	}
	if err := cgroup.Check(cgroup.Limits{Cpuset: nd.Cpuset}); err != nil {
		errs = append(errs, n.NodeError(nd, "cpuset", strings.TrimPrefix(err.Error(), cgroup.ErrLimit.Error()+": "), "name only cores this machine has"))
	}
	return errs
}

// createGroup makes node n's control group with its limits. Where the host has no usable
// cgroups (e.g. a container whose /sys/fs/cgroup shows none), a node
// without limits in the file starts without a group, and one with limits is refused.
func createGroup(env *kinds.Env, n *plan.Node) (*cgroup.Group, error) {
	l := limits(n.Node)
	h, err := hierarchy()
	if errors.Is(err, cgroup.ErrNoCgroups) && l == (cgroup.Limits{}) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := cgroup.Check(l); err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	return h.Create(groupName(env, n.Name), l)
}

// Sweep removes the groups of the network's nodes that are not running (their init was killed
// with its trellis before the group went, or never started), killing what is left in them.
func (Kind) Sweep(env *kinds.Env, running map[string]kinds.Instance) error {
	h, err := hierarchy()
	if errors.Is(err, cgroup.ErrNoCgroups) {
		return nil
	}
	if err != nil {
		return err
	}
	keep := func(node string) bool {
		_, ok := running[node]
		return ok
	}
	if names, ok := kinds.Groups(env, groupPrefix(env)); ok {
		return h.SweepNames(names, groupPrefix(env), keep)
	}
	return h.Sweep(groupPrefix(env), keep)
}

// Usage reads what a node uses from its control group.
func (Kind) Usage(env *kinds.Env, in kinds.Instance) (kinds.Usage, error) {
	h, err := hierarchy()
	if err != nil {
		return kinds.Usage{}, err
	}
	st, err := h.Open(groupName(env, in.Name)).Stats()
	if err != nil {
		return kinds.Usage{}, fmt.Errorf("node %s: %w", in.Name, err)
	}
	return kinds.Usage{CPUSeconds: st.CPU.Seconds(), Memory: st.Memory, Processes: st.Processes, OOMKills: st.OOMKills}, nil
}
