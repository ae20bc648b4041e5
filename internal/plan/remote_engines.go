package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/trellisnet/trellis/internal/spec"
)

// Engines on other machines (the PdP paper's cluster router; docs/engines.md). An engine whose
// `host:` is another machine than its node's is held there, in an FE of its own; each of its
// copies of the node's interfaces is a VXLAN device whose other end, on the node's machine, is
// the substrate end FEPorts[i][ifname] the classifier and dispatcher use like a veth's.

// EngineVXLANPort is the UDP port of the tunnels to remote engines; it is not the VXLAN
// tunnel kind's, so that their VNIs never meet.
const EngineVXLANPort = 4792

// Hosted is a node of another machine with engines held on this one.
type Hosted struct {
	Node     string
	Home     string            // the node's machine
	HomeAddr netip.Addr        // its underlay address
	Engines  []spec.Engine     // all of the node's engines (indexes as in the file)
	Here     []int             // the indexes of those held on this machine
	Ifaces   []HostedIface     // the node's link interfaces, copied in each FE
	Sysctl   map[string]string `json:",omitempty"`
}

// HostedIface is one of a hosted node's link interfaces.
type HostedIface struct {
	Name string
	MAC  string
	MTU  int // 0: the kernel's default
}

// EngineVNI is the VXLAN network identifier of engine i's copy of interface ifname of node
// node of network network: the same on both machines.
func EngineVNI(network, node string, i int, ifname string) uint32 {
	sum := sha256.Sum256(fmt.Appendf(nil, "trellis/engine/%s/%s/%d/%s", network, node, i, ifname))
	vni := binary.BigEndian.Uint32(sum[:4]) & 0xffffff
	if vni == 0 {
		vni = 1
	}
	return vni
}

// EngineMirrorPort is the TCP port on which the holder of engine i of node node listens for
// the mirror of the node's routes, neighbours and addresses: 20000 to 29999.
func EngineMirrorPort(network, node string, i int) int {
	sum := sha256.Sum256(fmt.Appendf(nil, "trellis/mirror/%s/%s/%d", network, node, i))
	return 20000 + int(binary.BigEndian.Uint32(sum[:4])%10000)
}

// Remote tells whether engine e of a node runs on another machine than host, the node's.
func Remote(e spec.Engine, host string) bool { return e.Host != "" && e.Host != host }

// addRemoteEngines fills in the machines the plan's nodes' remote engines are on, and the
// nodes of other machines with engines here.
func (p *Plan) addRemoteEngines(n *spec.Network, placed map[string]string) {
	for _, nd := range p.Nodes {
		for _, e := range nd.Engines {
			if Remote(e, p.Host) {
				if p.Hosts == nil {
					p.Hosts = map[string]netip.Addr{}
				}
				p.Hosts[e.Host] = n.Host(e.Host).Address
			}
		}
	}
	for _, nd := range n.Nodes {
		home := placed[nd.Name]
		if home == p.Host {
			continue
		}
		h := &Hosted{Node: nd.Name, Home: home, Engines: nd.Engines, Sysctl: nd.Sysctl}
		for i, e := range nd.Engines {
			if e.Host == p.Host && p.Host != "" {
				h.Here = append(h.Here, i)
			}
		}
		if len(h.Here) == 0 {
			continue
		}
		h.HomeAddr = n.Host(home).Address
		for _, l := range n.Links {
			for _, ep := range l.Endpoints {
				if ep.Node == nd.Name {
					h.Ifaces = append(h.Ifaces, HostedIface{Name: ep.Ifname, MAC: MAC(n.Name, nd.Name, ep.Ifname), MTU: linkMTU(n, l, home, placed)})
				}
			}
		}
		p.Hosted = append(p.Hosted, h)
	}
}

// HostedNode returns the hosted node named name, or nil.
func (p *Plan) HostedNode(name string) *Hosted {
	for _, h := range p.Hosted {
		if h.Node == name {
			return h
		}
	}
	return nil
}

// linkMTU is the MTU link l has on machine home, as Make gives it there: its own, or, when it
// crosses machines, what fits in the underlay with the network's tunnel.
func linkMTU(n *spec.Network, l *spec.Link, home string, placed map[string]string) int {
	if l.MTU != 0 {
		return l.MTU
	}
	underlay, crosses := n.Host(home).MTU, false
	for _, ep := range l.Endpoints {
		if h := placed[ep.Node]; h != home {
			crosses = true
			underlay = min(underlay, n.Host(h).MTU)
		}
	}
	if !crosses {
		return 0
	}
	return underlay - spec.TunnelOverhead(n.Tunnel)
}

// VXLANPeer is a tunnel to a remote engine as the machine's decapsulation program vets it: the
// packets of VNI come from Remote only.
type VXLANPeer struct {
	VNI    uint32
	Remote netip.Addr
}

// EnginePeers lists the VXLAN tunnels of plan p's machine to remote engines: those of its
// nodes' engines held on other machines, and those of the engines it holds for other
// machines' nodes.
func (p *Plan) EnginePeers() []VXLANPeer {
	var out []VXLANPeer
	for _, n := range p.Nodes {
		for i, e := range n.Engines {
			if !Remote(e, p.Host) || i >= len(n.FEPorts) {
				continue
			}
			for ifname := range n.FEPorts[i] {
				out = append(out, VXLANPeer{EngineVNI(p.Network, n.Name, i, ifname), p.Hosts[e.Host]})
			}
		}
	}
	for _, h := range p.Hosted {
		for _, i := range h.Here {
			for _, in := range h.Ifaces {
				out = append(out, VXLANPeer{EngineVNI(p.Network, h.Node, i, in.Name), h.HomeAddr})
			}
		}
	}
	return out
}
