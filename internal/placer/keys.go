package placer

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/trellisnet/trellis/internal/agent"
	"github.com/trellisnet/trellis/internal/cluster"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// vniMask keeps the bits of a tunnel key that are a VXLAN id (a VXLAN device's, unique on a
// machine); EGRE compares whole keys, so keys unique in these bits are unique as EGRE keys too.
const vniMask = 1<<24 - 1

// tunnelSecret is the secret of a network's tunnel keys: the previous placement's, or a new
// random one (128 bits) for a network placed for the first time.
func tunnelSecret(prev *cluster.Placement) (string, error) {
	if prev != nil && prev.Secret != "" {
		return prev.Secret, nil
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("tunnel secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

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
// machine its tunnel key, unique in the cluster and unpredictable from the names: the one it
// had (prev), else the one the placement's secret derives (plan.TunnelKey of TENANT.NETWORK)
// or, if another network holds that key's VXLAN id, the first free one after a random key.
// Keys of names alone could be found by a host on the underlay (it injects into the link),
// and a tenant could choose names whose key was another tenant's and keep that tenant's link
// off the machines they share (the second network's tunnel was refused); keys of random
// secrets still meet by chance (24 bits: likely among a few thousand links), hence the check.
func (p *placer) tunnelKeys(n *cluster.Network, sn *spec.Network, pl, prev *cluster.Placement) error {
	secret, err := hex.DecodeString(pl.Secret)
	if err != nil {
		return fmt.Errorf("tunnel secret: %w", err)
	}
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
			if k, err = freeKey(plan.TunnelKey(secret, agent.LocalName(n.Tenant, n.Name), l.Name), free); err != nil {
				return fmt.Errorf("%w: link %s: %w", ErrNoFit, l.Name, err)
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

// errKeysUsed says that every VXLAN id is some network's.
var errKeysUsed = errors.New("every tunnel key of the cluster is in use")

// freeKey returns k if it is free, else the first free key after a random one.
func freeKey(k uint32, free func(uint32) bool) (uint32, error) {
	if free(k) {
		return k, nil
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, fmt.Errorf("tunnel key: %w", err)
	}
	k = binary.BigEndian.Uint32(b[:])
	for tries := 0; !free(k); tries++ {
		if tries == vniMask {
			return 0, errKeysUsed
		}
		k++
	}
	return k, nil
}
