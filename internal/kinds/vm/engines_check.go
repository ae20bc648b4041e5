package vm

import (
	"fmt"

	"github.com/trellisnet/trellis/internal/spec"
)

// checkEngines refuses what a VM node with engines (parallel virtual routers, engines.go)
// cannot have yet: an interconnect other than tap, a guest without the trellis agent (which
// mirrors the node's routes into the engine VMs), or engines with cores or a machine of their
// own.
func checkEngines(n *spec.Network, nd *spec.Node) []*spec.Error {
	if len(nd.Engines) == 0 {
		return nil
	}
	var errs []*spec.Error
	if ic := interconnect(knobs(nd)); ic != InterconnectTap {
		errs = append(errs, n.NodeError(nd, "vm.interconnect", "engines on a VM node need the tap interconnect, not "+ic,
			"remove interconnect (tap is the default), or remove engines"))
	}
	if !knobs(nd).Agent() {
		errs = append(errs, n.NodeError(nd, "vm.initrd", "engines on a VM node need the trellis agent in each guest, which the own initrd lacks",
			"remove initrd, or remove engines"))
	}
	for i, e := range nd.Engines {
		field := fmt.Sprintf("nodes.%s.engines[%d]", nd.Name, i)
		switch {
		case e.Host != "":
			errs = append(errs, &spec.Error{File: n.File, Line: e.Line, Field: field + ".host",
				Msg: "an engine VM runs on its node's machine", Fix: "remove host"})
		case len(e.CPUs) > 0 || e.Share > 0:
			errs = append(errs, &spec.Error{File: n.File, Line: e.Line, Field: field + ".cpus",
				Msg: "an engine VM takes its cores from the node's vm.pin, not from cpus", Fix: "remove cpus, and pin with vm.pin"})
		}
	}
	return errs
}
