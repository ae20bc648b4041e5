package placer

import (
	"fmt"

	"github.com/trellisnet/trellis/internal/agent"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// vniMask keeps the bits of a tunnel key that are a VXLAN id (a VXLAN device's, unique on a
// machine); EGRE compares whole keys, so keys unique in these bits are unique as EGRE keys too.
const vniMask = 1<<24 - 1

// heldKeys lists the VXLAN ids of the tunnel keys the placements hold.
func heldKeys(places []*cluster.Placement) map[uint32]string {
	held := map[uint32]string{}
	for _, pl := range places {
		for _, k := range pl.Keys {
			held[k&vniMask] = pl.Tenant + "/" + pl.Network
		}
	}
	return held
}

// tunnelKeys gives each link of network n whose endpoints placement pl puts on more than one
// machine its tunnel key, unique in the cluster: the one it had (prev), else the one its names
// derive on the machines (plan.TunnelKey of TENANT.NETWORK) or, if another network holds that
// key's VXLAN id, the next free one. Derived keys are 24 or 32 bits of a hash of names a tenant
// chooses, so a tenant could find names that derive another tenant's key and keep that
// tenant's link off the machines they share (the second network's tunnel was refused).
func (p *placer) tunnelKeys(n *cluster.Network, sn *spec.Network, pl, prev *cluster.Placement) error {
	self := n.Tenant + "/" + n.Name
	free := func(k uint32) bool {
		owner, held := p.vnis[k&vniMask]
		return k&vniMask != 0 && (!held || owner == self)
	}
	for _, l := range sn.Links {
		machines := map[string]bool{}
		for _, ep := range l.Endpoints {
			machines[pl.Nodes[ep.Node]] = true
		}
		if len(machines) < 2 {
			continue
		}
		k, ok := uint32(0), false
		if prev != nil {
			k, ok = prev.Keys[l.Name]
		}
		if !ok || !free(k) {
			k = plan.TunnelKey(agent.LocalName(n.Tenant, n.Name), l.Name)
			for tries := 0; !free(k); tries++ {
				if tries == vniMask {
					return fmt.Errorf("%w: link %s: every tunnel key of the cluster is in use", ErrNoFit, l.Name)
				}
				k++
			}
		}
		if pl.Keys == nil {
			pl.Keys = map[string]uint32{}
		}
		pl.Keys[l.Name] = k
		p.vnis[k&vniMask] = self
	}
	return nil
}
