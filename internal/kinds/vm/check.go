package vm

import (
	"fmt"

	"github.com/trellisnet/trellis/internal/spec"
)

// check refuses what a VM node cannot have.
func check(n *spec.Network, nd *spec.Node) []*spec.Error {
	var errs []*spec.Error
	if nd.Needs.Memory > 0 && nd.Needs.Memory < 128<<20 {
		errs = append(errs, n.NodeError(nd, "memory", fmt.Sprintf("%d MiB is too little for a VM node", nd.Needs.Memory>>20), "give a VM at least 128M"))
	}
	return errs
}
