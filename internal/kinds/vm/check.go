package vm

import (
	"fmt"

	"github.com/trellisnet/trellis/internal/spec"
	"golang.org/x/sys/unix"
)

// minMemory is the least memory Debian's kernel boots the guest image in.
const minMemory = 128 << 20

// check refuses what a VM node cannot have: too little memory, or (in a network on this one
// machine) more than the machine has.
func check(n *spec.Network, nd *spec.Node) []*spec.Error {
	mem := nd.Needs.Memory
	switch {
	case mem > 0 && mem < minMemory:
		return []*spec.Error{n.NodeError(nd, "memory", fmt.Sprintf("%d MiB is too little for a VM node", mem>>20), "give a VM at least 128M")}
	case len(n.Hosts) == 0 && mem > hostMemory():
		return []*spec.Error{n.NodeError(nd, "memory", fmt.Sprintf("%d MiB is more than this machine has (%d MiB)", mem>>20, hostMemory()>>20), "give the VM less memory")}
	}
	return nil
}

// hostMemory is this machine's memory in bytes.
var hostMemory = func() uint64 {
	var info unix.Sysinfo_t
	if unix.Sysinfo(&info) != nil {
		return ^uint64(0)
	}
	return uint64(info.Totalram) * uint64(info.Unit)
}
