// Package plan turns a validated virtual network into what the substrate of one machine must
// hold: every node, port, connector and tunnel, with the name it has in the kernel. Names derive
// from stable identities (network, node, link and endpoint names), never from positions in the
// file, and are allocated once and kept in the network's record (Names), so that an edited file
// changes only what was edited (docs/design.md, decisions 8 and 9).
package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"

	"github.com/trellisnet/trellis/internal/spec"
)

// Plan is the desired state of one virtual network on one machine.
type Plan struct {
	Network string
	NetID   string     // 6 hex digits; every device name of this network starts with "tr"+NetID
	Host    string     // the machine this plan is for; "" when the network has no hosts
	Local   netip.Addr `json:",omitzero"`  // this machine's underlay address, when Host is set
	Tunnel  string     `json:",omitempty"` // the tunnel kind, when Host is set
	// TunnelSettings are the tunnel kind's own settings (spec.Network.TunnelSettings), which
	// the kind reads with TunnelKindSettings.
	TunnelSettings *spec.KindSettings `json:",omitempty"`
	Nodes          []*Node            // the nodes on this machine
	Links          []*Link            // the links with at least one endpoint on this machine
	// Hosts: the underlay addresses of the other machines holding engines of this plan's
	// nodes; Hosted: the nodes of other machines with engines on this one.
	Hosts  map[string]netip.Addr `json:",omitempty"`
	Hosted []*Hosted             `json:",omitempty"`
}

// Node is a node on this machine.
type Node struct {
	*spec.Node
	// Digest identifies the node's own settings (kind, loopback addresses, sysctl, files,
	// exec, limits, rootfs): a running node whose digest differs must restart to take the new settings. The
	// addresses of its link interfaces are not part of it: they change live, with the ports.
	Digest string
	// FEPorts, for a node with engines, name the substrate end of each engine's copy of each of
	// the node's link interfaces: FEPorts[i][ifname].
	FEPorts []map[string]string `json:",omitempty"`
}

// Link is a virtual link with the substrate objects that carry it.
type Link struct {
	Name      string
	Connector string // the link kind
	Rate      uint64 // bits per second, 0 = no cap
	MTU       int    // 0 = the kernel's default
	Down      bool   // the link's carrier is off
	Device    string // a substrate device name the connector may use (the LAN's bridge)
	// Settings are the link kind's own (the lan connector's table size and ageing): read them
	// with KindSettings. Their fields are among the link's own in its JSON (linkjson.go).
	Settings *spec.KindSettings `json:"-"`
	Ports    []Port
	Tunnels  []Tunnel `json:",omitempty"` // one per other machine with endpoints of this link
}

// Tunnel carries a link's frames to and from one other machine.
type Tunnel struct {
	Host   string     // the other machine
	Remote netip.Addr // its underlay address
	Key    uint32     // GRE key; its low 24 bits are the VXLAN VNI
	Device string     // the substrate device joined to the link's connector
	Encap  string     // a second device name, for tunnel kinds that need a pair
}

// Port is the substrate end of a virtual interface, whose other end is Ifname inside Node.
type Port struct {
	Node   string
	Ifname string
	Name   string // device name in the substrate
	MAC    string // the virtual interface's MAC address, derived from its identity
	// Addresses of the virtual interface (from its node's addresses): they change live.
	Addresses []string        `json:",omitempty"`
	Impair    spec.Impairment `json:",omitzero"`  // applied to the frames the interface sends
	Down      bool            `json:",omitempty"` // this endpoint's carrier is off
	// Classify: the port's node has engines, whose classifier is on the port's egress, or a
	// dataplane program, on the same hook (docs/ebpf-nodes.md), so the
	// frames for the node must go out of the port (never straight into its veth peer).
	Classify bool `json:",omitempty"`
}

func (p Port) String() string { return p.Node + ":" + p.Ifname }

// Make computes the plan of network n for machine host ("" when n has no hosts). scope
// distinguishes state directories that share a machine, so that two of them never derive the
// same device names; names.NetID, if set, is the network's id instead of the derived one. names holds the device names allocated so far (from the network's
// record; empty for a new network); Make allocates names for new objects in it.
func Make(n *spec.Network, scope, host string, names *Names) (*Plan, error) {
	p := &Plan{Network: n.Name, NetID: names.NetID, Host: host}
	if p.NetID == "" {
		p.NetID = NetID(scope, n.Name)
	}
	placed, err := Place(n)
	if err != nil {
		return nil, err
	}
	if host != "" {
		h := n.Host(host)
		if h == nil {
			return nil, fmt.Errorf("%s: no host named %q under hosts", n.File, host)
		}
		p.Local, p.Tunnel, p.TunnelSettings = h.Address, n.Tunnel, n.TunnelSettings
	} else if len(n.Hosts) > 0 {
		return nil, fmt.Errorf("%s spreads the network over several hosts: say which one this machine is", n.File)
	}
	for _, nd := range n.Nodes {
		if placed[nd.Name] == host {
			p.Nodes = append(p.Nodes, &Node{Node: nd, Digest: Digest(nd)})
		}
	}
	for i, l := range n.Links {
		pl := &Link{Name: l.Name, Connector: l.Connector, Rate: l.Rate, MTU: l.MTU, Down: l.State == spec.StateDown, Settings: l.Settings}
		remote := map[string]bool{}
		for _, e := range l.Endpoints {
			if h := placed[e.Node]; h != host {
				remote[h] = true
				continue
			}
			port := Port{Node: e.Node, Ifname: e.Ifname, Impair: l.ImpairmentFrom(e)}
			port.Name = names.device(p.NetID, 'p', "port/"+l.Name+"/"+port.String())
			port.MAC = MAC(n.Name, e.Node, e.Ifname)
			port.Addresses = n.Node(e.Node).Addresses[e.Ifname]
			port.Classify = len(n.Node(e.Node).Engines) > 0 || n.Node(e.Node).Dataplane != nil
			pl.Ports = append(pl.Ports, port)
		}
		if len(pl.Ports) == 0 {
			continue // nothing of this link on this machine
		}
		pl.Device = names.device(p.NetID, 'b', "link/"+l.Name)
		if len(remote) > 0 {
			if err := p.addTunnels(n, i, pl, remote, names); err != nil {
				return nil, err
			}
		}
		p.direct(l, pl)
		p.Links = append(p.Links, pl)
	}
	p.engineNames(names)
	p.nodeDigests()
	p.addRemoteEngines(n, placed)
	return p, nil
}

// engineNames names the substrate end of each engine's copy of each link interface of the
// nodes with engines: identity "engine/NODE/I/IFNAME", device letter 'e'.
func (p *Plan) engineNames(names *Names) {
	for _, nd := range p.Nodes {
		if len(nd.Engines) == 0 {
			continue
		}
		for i := range nd.Engines {
			m := map[string]string{}
			for _, l := range p.Links {
				for _, port := range l.Ports {
					if port.Node == nd.Name {
						m[port.Ifname] = names.device(p.NetID, 'e', EngineID(nd.Name, i, port.Ifname))
					}
				}
			}
			nd.FEPorts = append(nd.FEPorts, m)
		}
	}
}

// EngineID is the identity of engine i's copy of interface ifname of node node.
func EngineID(node string, i int, ifname string) string {
	return fmt.Sprintf("engine/%s/%d/%s", node, i, ifname)
}

// addTunnels gives a link one tunnel per other machine holding its endpoints, and the MTU that
// fits the tunnel into the underlay.
func (p *Plan) addTunnels(n *spec.Network, index int, pl *Link, remote map[string]bool, names *Names) error {
	l := n.Links[index]
	underlay := n.Host(p.Host).MTU
	for _, h := range n.Hosts {
		if !remote[h.Name] {
			continue
		}
		underlay = min(underlay, h.MTU)
		t := Tunnel{Host: h.Name, Remote: h.Address, Key: l.TunnelKey}
		if t.Key == 0 {
			t.Key = TunnelKey(n.TunnelSecret, n.Name, l.Name)
		}
		device, encap := tunnelDevices(p.Tunnel, l.Name, h.Name)
		t.Device = names.device(p.NetID, 't', device)
		if encap != "" {
			t.Encap = names.device(p.NetID, 'u', encap)
		}
		pl.Tunnels = append(pl.Tunnels, t)
	}
	fit := underlay - spec.TunnelOverhead(p.Tunnel)
	if pl.MTU > fit {
		return &spec.Error{File: n.File, Line: l.MTULine, Field: fmt.Sprintf("links[%d].mtu", index),
			Msg: fmt.Sprintf("the link crosses machines, and %d does not fit in the underlay with the %s tunnel", pl.MTU, p.Tunnel),
			Fix: fmt.Sprintf("use at most %d, or raise the hosts' mtu", fit)}
	}
	if pl.MTU == 0 {
		pl.MTU = fit
	}
	return nil
}

// Digest identifies the settings of a node that only a restart can apply. A setting left out
// of the file leaves the digest as it was before the setting existed.
func Digest(nd *spec.Node) string {
	data, _ := json.Marshal(struct {
		Kind     string
		Loopback []string
		Exec     []string
		Files    []spec.File
		Sysctl   map[string]string
		Needs    spec.Capacity       `json:",omitzero"`  // a VM's cores and memory, a container's limits
		Cpuset   string              `json:",omitempty"` // limits: absent (and digests unchanged) when not given
		Pids     int64               `json:",omitempty"`
		Default  uint64              `json:",omitempty"` // a cluster's default memory limit
		VM       *spec.KindSettings  `json:",omitempty"` // the kind's own settings (a VM's knobs)
		Rootfs   string              `json:",omitempty"` // a container's own root directory
		ImageSet *spec.ImageOverride `json:",omitempty"` // changes of an image's config
		// Dataplane: the node has a program (added or taken away, it starts again; a changed
		// program replaces the old one live: substrate/dataplane.go).
		Dataplane bool `json:",omitempty"`
	}{nd.Kind, nd.Addresses["lo"], nd.Exec, nd.Files, nd.Sysctl, nd.Needs, nd.Cpuset, nd.Pids, nd.DefaultMemory, nd.Settings, nd.Rootfs, nd.ImageSet, nd.Dataplane != nil}) // maps marshal in key order
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// MAC derives the MAC address of a virtual interface from the network, node and interface
// names: locally administered and unicast, the same every time, so that a node started anew
// keeps its interfaces' addresses and its neighbours' ARP and ND caches stay right.
func MAC(network, node, ifname string) string {
	sum := sha256.Sum256([]byte("trellis-mac/" + network + "/" + node + "/" + ifname))
	sum[0] = sum[0]&0xfc | 0x02
	return net.HardwareAddr(sum[:6]).String()
}

// NetID derives a network's short identifier from its state scope and name.
func NetID(scope, name string) string {
	sum := sha256.Sum256([]byte(scope + "/" + name))
	return hex.EncodeToString(sum[:3])
}

// Node returns the plan's node of that name, or nil.
func (p *Plan) Node(name string) *Node {
	for _, n := range p.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Link returns the plan's link of that name, or nil.
func (p *Plan) Link(name string) *Link {
	for _, l := range p.Links {
		if l.Name == name {
			return l
		}
	}
	return nil
}
