package plan

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"math"

	"github.com/trellisnet/trellis/internal/plan/placement"
	"github.com/trellisnet/trellis/internal/spec"
)

// Place assigns every node of a network to a host. A node that names its host goes there. If
// the file gives capacities (a host's cpu, memory or rate, a node's cpu or memory), the others
// are placed by the embedding algorithm (placement.PlaceNetwork): every host's capacity is
// respected, links are kept inside machines where they fit, and a network that does not fit is
// refused with the host and resource that are short. Without capacities they go, in file
// order, to the host with the fewest nodes so far (the first such in file order). Every machine
// computes the same placement from the same file.
func Place(n *spec.Network) (map[string]string, error) {
	out := map[string]string{}
	if len(n.Hosts) == 0 {
		return out, nil
	}
	if hasCapacities(n) {
		return placeByCapacity(n)
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
	return out, nil
}

func hasCapacities(n *spec.Network) bool {
	for _, h := range n.Hosts {
		if !h.Capacity.IsZero() {
			return true
		}
	}
	for _, nd := range n.Nodes {
		if !nd.Needs.IsZero() {
			return true
		}
	}
	return false
}

// placeByCapacity places with the embedding algorithm; memory counts in MiB and rates in
// Mbit/s there. A host without a figure is not limited in it.
func placeByCapacity(n *spec.Network) (map[string]string, error) {
	const mib, mbit = 1 << 20, 1e6
	var machines []placement.Machine
	for _, h := range n.Hosts {
		m := placement.Machine{Name: h.Name, Cores: h.Capacity.CPU, Memory: float64(h.Capacity.Memory) / mib, NIC: float64(h.Capacity.Rate) / mbit}
		if m.Cores == 0 {
			m.Cores = math.MaxFloat32
		}
		machines = append(machines, m)
	}
	var nodes []placement.NetNode
	for _, nd := range n.Nodes {
		nodes = append(nodes, placement.NetNode{Name: nd.Name, CPU: nd.Needs.CPU, Memory: float64(nd.Needs.Memory) / mib, Machine: nd.Host})
	}
	var links []placement.NetLink
	for _, l := range n.Links {
		for i := 1; i < len(l.Endpoints); i++ { // a LAN counts as a star from its first member
			links = append(links, placement.NetLink{A: l.Endpoints[0].Node, B: l.Endpoints[i].Node, Rate: float64(l.Rate) / mbit})
		}
	}
	out, err := placement.PlaceNetwork(machines, nodes, links)
	if err != nil {
		return nil, n.NetworkError("hosts", "the network does not fit on its hosts: "+err.Error()+" (memory in MiB, rates in Mbit/s)",
			"give the hosts more cpu, memory or rate, or the nodes and links less")
	}
	return out, nil
}

// TunnelKey is the GRE key (or, its low 24 bits, the VXLAN VNI) of a link that crosses
// machines. Every machine derives the same key from the network and link names without
// talking to the others: keyed with the network's secret when it has one (HMAC-SHA256), so
// that nobody without the secret can predict it (a cluster's placement holds a random one; a
// file with hosts may name one), or else from the names alone. The substrate refuses a key
// already in use. In a cluster, the placer allocates keys unique in the cluster instead
// (spec.Link.TunnelKey), and this key is the first it tries.
func TunnelKey(secret []byte, network, link string) uint32 {
	var sum []byte
	if len(secret) > 0 {
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte("trellis/" + network + "/" + link))
		sum = mac.Sum(nil)
	} else {
		s := sha256.Sum256([]byte("trellis/" + network + "/" + link))
		sum = s[:]
	}
	key := binary.BigEndian.Uint32(sum[:4])
	if key&0xffffff == 0 {
		key |= 1 // VNI 0 is not allowed
	}
	return key
}
