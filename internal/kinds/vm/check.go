package vm

import (
	"fmt"
	"time"

	"github.com/trellisnet/trellis/internal/spec"
	"golang.org/x/sys/unix"
)

// minMemory is the least memory the default guest image works in. The kernel unpacks the
// image into a root file system it sizes at about a quarter of the guest's memory; an image
// that does not fit is cut short without a word (its last libraries missing), and about 70 MB
// of image (trellis as the guest agent, libraries, modules) needs 320M.
const minMemory = 320 << 20

// minMemoryFRR is the least memory of a node whose image holds FRR (image.go), about 92 MB of
// image: in 320M its programs were cut short (vtysh segfaulted), in 352M they were whole.
const minMemoryFRR = 384 << 20

// check refuses what a VM node cannot have: too little memory, a vCPU thread both
// fixed-priority and reserved, a reservation that as a CPU quota is under the kernel's 1ms, or (in a network on this one machine) more memory or other cores
// than the machine has.
func check(n *spec.Network, nd *spec.Node) []*spec.Error {
	var errs []*spec.Error
	here := len(n.Hosts) == 0
	mem := nd.Needs.Memory
	vms := uint64(1 + len(nd.Engines)) // the node's VM and its engines' (engines.go)
	switch {
	case mem > 0 && mem < minMemory && knobs(nd).Agent(): // the user's own initrd may need less
		errs = append(errs, n.NodeError(nd, "memory", fmt.Sprintf("%d MiB is too little for a VM node", mem>>20), "give a VM at least 320M"))
	case mem > 0 && mem < minMemoryFRR && knobs(nd).Agent() && wantsFRR(nd):
		errs = append(errs, n.NodeError(nd, "memory", fmt.Sprintf("%d MiB is too little for a VM node that runs FRR", mem>>20), "give a VM with FRR at least 384M (its image is 20 MB larger)"))
	case here && mem > hostMemory():
		errs = append(errs, n.NodeError(nd, "memory", fmt.Sprintf("%d MiB is more than this machine has (%d MiB)", mem>>20, hostMemory()>>20), "give the VM less memory"))
	case here && vms > 1 && guestMemory(nd)*vms > hostMemory():
		errs = append(errs, n.NodeError(nd, "engines", fmt.Sprintf("%d VMs of %d MiB (the node's and its %d engines') are more than this machine has (%d MiB)",
			vms, guestMemory(nd)>>20, vms-1, hostMemory()>>20), "give fewer engines, or each VM less memory"))
	}
	errs = append(errs, checkEngines(n, nd)...)
	s := knobs(nd)
	if s == nil {
		return errs
	}
	if quotaReserve(s) && time.Duration(s.Reserve*float64(s.Period)*float64(vcpus(nd))) < time.Millisecond {
		errs = append(errs, n.NodeError(nd, "vm.reserve", "with pinned vCPUs the reservation is a CPU quota, and this one is under 1ms a period", "give a larger share or a longer period"))
	}
	if s.PrioVCPU > 0 && s.Reserve > 0 {
		errs = append(errs, n.NodeError(nd, "vm.reserve", "the vCPU threads have a priority too", "a vCPU thread is either fixed-priority (SCHED_FIFO) or reserved (SCHED_DEADLINE): drop priority.vcpu or reserve"))
	}
	if here {
		cpus := hostCPUs()
		for _, c := range append(append([]int{}, s.PinVCPU...), s.PinIO...) {
			if !cpus.IsSet(c) {
				errs = append(errs, n.NodeError(nd, "vm.pin", fmt.Sprintf("this machine has no CPU %d (it has %s)", c, cpuList(&cpus)), "pin to CPUs the machine has"))
				break
			}
		}
	}
	return errs
}

// hostCPUs are the CPUs trellis may run on.
var hostCPUs = func() unix.CPUSet {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		for c := range 1024 {
			set.Set(c)
		}
	}
	return set
}

// hostMemory is this machine's memory in bytes.
var hostMemory = func() uint64 {
	var info unix.Sysinfo_t
	if unix.Sysinfo(&info) != nil {
		return ^uint64(0)
	}
	return uint64(info.Totalram) * uint64(info.Unit)
}
