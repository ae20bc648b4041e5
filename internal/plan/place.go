package plan

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/trellisnet/trellis/internal/spec"
)

// Place assigns every node of a network to a host: a node that names its host goes there; the
// others go, in file order, to the host with the fewest nodes so far (the first such in file
// order). Every machine computes the same placement from the same file.
func Place(n *spec.Network) map[string]string {
	out := map[string]string{}
	if len(n.Hosts) == 0 {
		return out
	}
	count := map[string]int{}
	for _, nd := range n.Nodes {
		if nd.Host != "" {
			out[nd.Name] = nd.Host
			count[nd.Host]++
		}
	}
	for _, nd := range n.Nodes {
		if nd.Host != "" {
			continue
		}
		best := n.Hosts[0].Name
		for _, h := range n.Hosts[1:] {
			if count[h.Name] < count[best] {
				best = h.Name
			}
		}
		out[nd.Name] = best
		count[best]++
	}
	return out
}

// TunnelKey is the GRE key (or, its low 24 bits, the VXLAN VNI) of a link that crosses
// machines. It derives from the network and link names only, so that every machine agrees
// on it without talking to the others; the substrate refuses a key already in use.
func TunnelKey(network, link string) uint32 {
	sum := sha256.Sum256([]byte("trellis/" + network + "/" + link))
	key := binary.BigEndian.Uint32(sum[:4])
	if key&0xffffff == 0 {
		key |= 1 // VNI 0 is not allowed
	}
	return key
}
