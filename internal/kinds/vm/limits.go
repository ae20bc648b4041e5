package vm

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/trellisnet/trellis/internal/cgroup"
	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// A VM node's QEMU runs in a control group of its own (internal/cgroup), as a container
// node's processes do: its memory is the guest's plus QEMU's overhead, its processes and
// threads are counted, and its CPU is the node's `cpu` as a quota, or, when the vCPU threads
// are pinned and a reservation is asked for, the reservation as a quota (the kernel gives
// SCHED_DEADLINE only to threads that may run on every CPU of their root domain).

var hierarchy = sync.OnceValues(cgroup.Detect)

// Overheads: what QEMU holds beside the guest's memory (its own heap, device models, the
// agent's buffers), and under TCG the translation buffer, whose size trellis sets.
const (
	qemuOverhead = 128 << 20
	tcgBufferMiB = 128
)

// groupPrefix starts the names of the network's VM groups; the container kind's groups begin
// with the state and network ids, so neither kind's sweep meets the other's groups.
func groupPrefix(env *kinds.Env) string { return "vm." + env.Store.ID + "." + env.Plan.NetID + "." }

func groupName(env *kinds.Env, node string) string { return groupPrefix(env) + node }

// vcpus is the number of vCPUs of node n: its `cpu`, rounded up, 1 by default.
func vcpus(n *spec.Node) int {
	if n.Needs.CPU > 1 {
		return int(n.Needs.CPU + 0.999)
	}
	return 1
}

// guestMemory is node n's guest memory in bytes: its `memory`, 512M by default.
func guestMemory(n *spec.Node) uint64 {
	if n.Needs.Memory > 0 {
		return max(n.Needs.Memory, minMemory)
	}
	return DefaultMemory
}

// quotaReserve tells whether node n's reservation is a CPU quota (pinned vCPUs) rather than
// SCHED_DEADLINE.
func quotaReserve(s *Settings) bool {
	return s != nil && s.Reserve > 0 && len(s.PinVCPU) > 0
}

// limits are the cgroup limits of node n's QEMU under accelerator accel.
func limits(n *spec.Node, accel string) cgroup.Limits {
	l := cgroup.Limits{CPUs: n.Needs.CPU, Memory: guestMemory(n) + qemuOverhead, Pids: n.Pids, Cpuset: n.Cpuset}
	if accel == "tcg" {
		l.Memory += tcgBufferMiB << 20
	}
	if quotaReserve(knobs(n)) {
		l.CPUs, l.Period = knobs(n).Reserve*float64(vcpus(n)), knobs(n).Period
	}
	// The engine VMs of a node (engines.go) share its group, each with what the node's has.
	if k := uint64(1 + len(n.Engines)); k > 1 {
		l.Memory *= k
		l.CPUs *= float64(k)
		l.Pids *= int64(k)
	}
	// A VM may have more vCPUs than the machine has cores; its quota is at most all of them.
	cpus := hostCPUs()
	l.CPUs = min(l.CPUs, float64(cpus.Count()))
	return l
}

// quotaNote says in inspect what CPU quota stands for a reservation, or "".
func quotaNote(n *plan.Node) string {
	if n == nil || !quotaReserve(knobs(n.Node)) {
		return ""
	}
	l := limits(n.Node, Accel())
	return fmt.Sprintf("reserve %g%% %s of each of %d pinned vCPUs as the cgroup CPU quota %s per %s (not SCHED_DEADLINE)",
		knobs(n.Node).Reserve*100, knobs(n.Node).Period, vcpus(n.Node), time.Duration(l.CPUs*float64(l.Period)).Round(time.Microsecond), l.Period)
}

// createGroup makes node n's control group with its limits. Where the host has no usable
// cgroups, a VM without limits that need one starts without a group.
func createGroup(env *kinds.Env, n *plan.Node) (*cgroup.Group, error) {
	h, err := hierarchy()
	if errors.Is(err, cgroup.ErrNoCgroups) && n.Needs.CPU == 0 && n.Pids == 0 && n.Cpuset == "" && !quotaReserve(knobs(n.Node)) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("VM %s: %w", n.Name, err)
	}
	l := limits(n.Node, Accel())
	if err := cgroup.Check(l); err != nil {
		return nil, fmt.Errorf("VM %s: %w", n.Name, err)
	}
	return h.Create(groupName(env, n.Name), l)
}

// removeGroup removes node name's group once its QEMU is gone.
func removeGroup(env *kinds.Env, name string) error {
	h, err := hierarchy()
	if errors.Is(err, cgroup.ErrNoCgroups) {
		return nil
	}
	if err != nil {
		return err
	}
	return h.Open(groupName(env, name)).Remove()
}

// sweepGroups removes the groups of the network's VMs that do not run, killing what is left in
// them (a QEMU whose trellis was killed while starting it is found by Running, and stopped).
func sweepGroups(env *kinds.Env, running map[string]kinds.Instance) error {
	h, err := hierarchy()
	if errors.Is(err, cgroup.ErrNoCgroups) {
		return nil
	}
	if err != nil {
		return err
	}
	keep := func(node string) bool {
		in, ok := running[node]
		return ok && in.Kind == Name
	}
	if names, ok := kinds.Groups(env, groupPrefix(env)); ok {
		return h.SweepNames(names, groupPrefix(env), keep)
	}
	return h.Sweep(groupPrefix(env), keep)
}

// Usage reads what a VM uses from its QEMU's control group.
func (Kind) Usage(env *kinds.Env, in kinds.Instance) (kinds.Usage, error) {
	h, err := hierarchy()
	if err != nil {
		return kinds.Usage{}, err
	}
	st, err := h.Open(groupName(env, in.Name)).Stats()
	if err != nil {
		return kinds.Usage{}, fmt.Errorf("VM %s: %w", in.Name, err)
	}
	return kinds.Usage{CPUSeconds: st.CPU.Seconds(), Memory: st.Memory, Processes: st.Processes, OOMKills: st.OOMKills}, nil
}
