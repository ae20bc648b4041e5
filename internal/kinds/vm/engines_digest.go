package vm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/trellisnet/trellis/internal/plan"
)

// NodeDigest folds into the digest of a VM node with engines (parallel virtual routers,
// docs/vm.md) what its engine VMs were started with: how many, and the node's link interfaces
// with their addresses and MTUs, which the engine VMs copy at boot. A change of them starts
// the node and its engine VMs anew, where a container node's engines change live
// (plan.NodeDigester). A node without engines keeps its digest.
func (Kind) NodeDigest(p *plan.Plan, nd *plan.Node) string {
	if len(nd.Engines) == 0 {
		return nd.Digest
	}
	type iface struct {
		Link, Ifname string
		MTU          int
		Addresses    []string
	}
	var ifaces []iface
	for _, l := range p.Links {
		for _, port := range l.Ports {
			if port.Node == nd.Name {
				ifaces = append(ifaces, iface{l.Name, port.Ifname, l.MTU, port.Addresses})
			}
		}
	}
	data, _ := json.Marshal(struct {
		Digest  string
		Engines int
		Ifaces  []iface
	}{nd.Digest, len(nd.Engines), ifaces})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// EngineOwn: a VM node's engines are VMs of their own (enginehelper.VMEngines); what the
// classifier sends to the node itself are its loopback addresses.
func (Kind) EngineOwn(nd *plan.Node) []string { return nd.Addresses["lo"] }
