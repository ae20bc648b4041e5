package plan

import (
	"bytes"
	"encoding/json"

	"github.com/trellisnet/trellis/internal/spec"
)

// What the plan asks of a kind it cannot tell from the file: interfaces the kind's
// implementation (spec.NodeKind.Impl, LinkKind.Impl, TunnelKind.Impl) may implement. The plan
// cannot import the kinds (they import it), and tests no kind's name or flag.

// Wirer is a link kind that joins a point-to-point link with nothing in the substrate (the
// wire kind: one veth pair between its nodes; kinds.Wire makes it). The plan chooses it for a
// link that names no connector (or `connector: auto`) and has nothing to enforce (NeedsPorts).
type Wirer interface {
	// Wires says whether it can join nodes of kinds a and b.
	Wires(a, b string) bool
}

// NodeDigester is a node kind whose nodes start with more of the plan than the node's own
// settings (a VM's engine VMs copy its link interfaces at boot): NodeDigest returns node n's
// digest with that folded in, so that a change of it starts the node anew.
type NodeDigester interface {
	NodeDigest(p *Plan, n *Node) string
}

// TunnelDevices is a tunnel kind that says which devices carry a link's tunnels: Devices
// returns the identities, unique in the network, of the device that carries link to host and
// of its encapsulation port ("" for none); the plan names the devices after them. A tunnel
// kind that is not a TunnelDevices has a device and an encapsulation port per link and machine.
type TunnelDevices interface {
	Devices(link, host string) (device, encap string)
}

// wireKind returns the name of the registered link kind that is a Wirer, and it.
func wireKind() (string, Wirer) {
	for _, name := range spec.LinkKinds() {
		k, _ := spec.LookupLinkKind(name)
		if w, ok := k.Impl.(Wirer); ok {
			return name, w
		}
	}
	return "", nil
}

// nodeDigests gives each node whose kind is a NodeDigester the digest the kind makes.
func (p *Plan) nodeDigests() {
	for _, n := range p.Nodes {
		k, _ := spec.LookupNodeKind(n.Kind)
		if d, ok := k.Impl.(NodeDigester); ok {
			n.Digest = d.NodeDigest(p, n)
		}
	}
}

// tunnelDevices returns the identities of the devices of link's tunnel to host (TunnelDevices).
func tunnelDevices(kind, link, host string) (device, encap string) {
	k, _ := spec.LookupTunnelKind(kind)
	if td, ok := k.Impl.(TunnelDevices); ok {
		return td.Devices(link, host)
	}
	id := "tunnel/" + link + "/" + host
	return id, id
}

// TunnelKindSettings returns the settings of the plan's tunnel kind, or nil.
func (p *Plan) TunnelKindSettings() spec.Settings {
	return spec.TunnelKindSettings(p.Tunnel, p.TunnelSettings)
}

// SameTunnel says whether plans p and o carry links with the same tunnel kind and settings:
// if not, the tunnels of one are not those of the other.
func (p *Plan) SameTunnel(o *Plan) bool {
	if p.Tunnel != o.Tunnel {
		return false
	}
	a, errA := json.Marshal(p.TunnelSettings)
	b, errB := json.Marshal(o.TunnelSettings)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}
