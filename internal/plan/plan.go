// Package plan turns a validated virtual network into what the substrate must hold: every
// kernel object trellis will create, with the name it will have. Names are derived from the
// network, so that everything can be found again after a crash (DESIGN.md decision 7).
package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"

	"github.com/trellisnet/trellis/internal/spec"
)

// Plan is the desired state of one virtual network on one machine.
type Plan struct {
	Network string
	NetID   string       // 6 hex digits; every device name of this network starts with "tr"+NetID
	Host    string       // the machine this plan is for; "" when the network has no hosts
	Local   netip.Addr   `json:",omitzero"`  // this machine's underlay address, when Host is set
	Tunnel  string       `json:",omitempty"` // spec.EGRE or spec.VXLAN, when Host is set
	Nodes   []*spec.Node // the nodes on this machine
	Links   []*Link      // the links with at least one endpoint on this machine
}

// Link is a virtual link with the substrate objects that carry it.
type Link struct {
	Name      string
	Connector string // spec.Shortbridge or spec.Bridge
	Rate      uint64 // bits per second, 0 = no cap
	MTU       int
	Bridge    string // the bridge device, for the bridge connector
	Ports     []Port
	Tunnels   []Tunnel `json:",omitempty"` // one per other machine with endpoints of this link
}

// Tunnel carries a link's frames to and from one other machine.
type Tunnel struct {
	Host   string     // the other machine
	Remote netip.Addr // its underlay address
	Key    uint32     // GRE key; its low 24 bits are the VXLAN VNI
	Device string     // the substrate device joined to the link's connector
	Encap  string     // EGRE: the veth peer of Device, whose ingress encapsulates
}

// Port is the substrate end of a virtual interface: a veth whose peer is Ifname inside Node.
type Port struct {
	Node   string
	Ifname string
	Name   string // device name in the substrate
}

// Make computes the plan of network n for machine host ("" when n has no hosts). scope
// distinguishes state directories that share a machine, so that two of them never derive the
// same device names.
func Make(n *spec.Network, scope, host string) (*Plan, error) {
	p := &Plan{Network: n.Name, NetID: NetID(scope, n.Name), Host: host}
	placed := Place(n)
	if host != "" {
		h := n.Host(host)
		if h == nil {
			return nil, fmt.Errorf("%s: no host named %q under hosts", n.File, host)
		}
		p.Local, p.Tunnel = h.Address, n.Tunnel
	} else if len(n.Hosts) > 0 {
		return nil, fmt.Errorf("%s spreads the network over several hosts: say which one this machine is", n.File)
	}
	for _, nd := range n.Nodes {
		if placed[nd.Name] == host {
			p.Nodes = append(p.Nodes, nd)
		}
	}
	var count [256]int // devices made so far, by kind letter
	next := func(kind byte) string {
		count[kind]++
		return DeviceName(p.NetID, kind, count[kind]-1)
	}
	for i, l := range n.Links {
		pl := &Link{Name: l.Name, Connector: l.Connector, Rate: l.Rate, MTU: l.MTU}
		remote := map[string]bool{}
		for _, e := range l.Endpoints {
			if h := placed[e.Node]; h != host {
				remote[h] = true
				continue
			}
			pl.Ports = append(pl.Ports, Port{Node: e.Node, Ifname: e.Ifname, Name: next('p')})
		}
		if len(pl.Ports) == 0 {
			continue // nothing of this link on this machine
		}
		if len(remote) > 0 {
			if err := p.addTunnels(n, i, pl, remote, next); err != nil {
				return nil, err
			}
		}
		if pl.Connector == spec.Bridge {
			pl.Bridge = next('b')
		}
		p.Links = append(p.Links, pl)
	}
	return p, nil
}

// addTunnels gives a link one tunnel per other machine holding its endpoints, and the MTU that
// fits the tunnel into the underlay.
func (p *Plan) addTunnels(n *spec.Network, index int, pl *Link, remote map[string]bool, next func(byte) string) error {
	l := n.Links[index]
	underlay := n.Host(p.Host).MTU
	for _, h := range n.Hosts {
		if !remote[h.Name] {
			continue
		}
		underlay = min(underlay, h.MTU)
		t := Tunnel{Host: h.Name, Remote: h.Address, Key: TunnelKey(n.Name, l.Name)}
		switch {
		case p.Tunnel == spec.EGRE:
			t.Device, t.Encap = next('t'), next('u')
		case len(pl.Tunnels) == 0:
			t.Device = next('v')
		default:
			t.Device = pl.Tunnels[0].Device // one VXLAN device reaches all the link's machines
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

// NetID derives a network's short identifier from its state scope and name.
func NetID(scope, name string) string {
	sum := sha256.Sum256([]byte(scope + "/" + name))
	return hex.EncodeToString(sum[:3])
}

// DeviceName names a substrate device: "tr", the network's id, a kind letter (p port, b bridge,
// t tunnel port and u its encapsulating peer, v VXLAN device) and an index. It fits IFNAMSIZ for up to a million ports.
func DeviceName(netID string, kind byte, index int) string {
	return fmt.Sprintf("tr%s%c%d", netID, kind, index)
}

// DeviceKind returns the kind letter of a substrate device name made by DeviceName, or 0.
func DeviceKind(dev string) byte {
	if deviceRE.MatchString(dev) {
		return dev[8]
	}
	return 0
}

var deviceRE = regexp.MustCompile(`^tr([0-9a-f]{6})[pbtuv][0-9]+$`)

// DeviceNetID returns the network id in a substrate device name, or "" if trellis did not
// name the device.
func DeviceNetID(dev string) string {
	m := deviceRE.FindStringSubmatch(dev)
	if m == nil {
		return ""
	}
	return m[1]
}

// SameExceptRates tells whether two plans differ at most in their links' rates: the one
// change that is applied to a running network in place.
func SameExceptRates(a, b *Plan) bool {
	return shape(a) == shape(b)
}

func shape(p *Plan) string {
	c := *p
	c.Links = nil
	for _, l := range p.Links {
		lc := *l
		lc.Rate = 0
		c.Links = append(c.Links, &lc)
	}
	data, _ := json.Marshal(c) // a Plan always marshals
	return string(data)
}
