package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/trellisnet/trellis/internal/spec"
)

// engineVMDigests folds into the digest of each VM node with engines (parallel virtual routers,
// docs/vm.md) what its engine VMs were started with: how many, and the node's link interfaces
// with their addresses and MTUs, which the engine VMs copy at boot. A change of them starts
// the node and its engine VMs anew, where a container node's engines change live.
func (p *Plan) engineVMDigests() {
	for _, nd := range p.Nodes {
		if k, _ := spec.LookupNodeKind(nd.Kind); len(nd.Engines) == 0 || !k.EngineVMs {
			continue
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
		nd.Digest = hex.EncodeToString(sum[:6])
	}
}
