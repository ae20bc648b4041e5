// Package plan turns a validated virtual network into what the substrate must hold: every
// kernel object trellis will create, with the name it will have. Names are derived from the
// network, so that everything can be found again after a crash (DESIGN.md decision 7).
package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/trellisnet/trellis/internal/spec"
)

// Plan is the desired state of one virtual network on one machine.
type Plan struct {
	Network string
	NetID   string // 6 hex digits; every device name of this network starts with "tr"+NetID
	Nodes   []*spec.Node
	Links   []*Link
}

// Link is a virtual link with the substrate objects that carry it.
type Link struct {
	Name      string
	Connector string // spec.Shortbridge or spec.Bridge
	Rate      uint64 // bits per second, 0 = no cap
	MTU       int
	Bridge    string // the bridge device, for the bridge connector
	Ports     []Port
}

// Port is the substrate end of a virtual interface: a veth whose peer is Ifname inside Node.
type Port struct {
	Node   string
	Ifname string
	Name   string // device name in the substrate
}

// Make computes the plan for network n. scope distinguishes state directories that share a
// machine, so that two of them never derive the same device names.
func Make(n *spec.Network, scope string) *Plan {
	p := &Plan{Network: n.Name, NetID: NetID(scope, n.Name), Nodes: n.Nodes}
	port := 0
	for i, l := range n.Links {
		pl := &Link{Name: l.Name, Connector: l.Connector, Rate: l.Rate, MTU: l.MTU}
		if l.Connector == spec.Bridge {
			pl.Bridge = DeviceName(p.NetID, 'b', i)
		}
		for _, e := range l.Endpoints {
			pl.Ports = append(pl.Ports, Port{Node: e.Node, Ifname: e.Ifname, Name: DeviceName(p.NetID, 'p', port)})
			port++
		}
		p.Links = append(p.Links, pl)
	}
	return p
}

// NetID derives a network's short identifier from its state scope and name.
func NetID(scope, name string) string {
	sum := sha256.Sum256([]byte(scope + "/" + name))
	return hex.EncodeToString(sum[:3])
}

// DeviceName names a substrate device: "tr", the network's id, a kind letter (p port, b bridge)
// and an index. It fits IFNAMSIZ for up to a million ports.
func DeviceName(netID string, kind byte, index int) string {
	return fmt.Sprintf("tr%s%c%d", netID, kind, index)
}

var deviceRE = regexp.MustCompile(`^tr([0-9a-f]{6})[pb][0-9]+$`)

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
