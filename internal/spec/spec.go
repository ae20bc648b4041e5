// Package spec reads a topology file into a virtual network: it parses the YAML, rejects what
// is malformed with an error naming the file, line and field, and fills in defaults. It knows
// nothing of the kernel; the plan and substrate layers take a validated Network from here.
package spec

import (
	"fmt"
	"net/netip"
)

// Connector kinds: what joins the ports of a virtual link in the substrate.
const (
	Shortbridge = "shortbridge" // eBPF hand-over between the two ports of a point-to-point link
	Bridge      = "bridge"      // Linux bridge, for LANs
)

// Tunnel kinds: how a virtual link crosses between physical machines.
const (
	EGRE  = "egre"  // Ethernet in keyed GRE, in eBPF (DESIGN.md decision 5)
	VXLAN = "vxlan" // the kernel's VXLAN device
)

// Network is one user's virtual network as declared in a topology file.
type Network struct {
	Name   string
	File   string  // path of the topology file, for messages
	Hosts  []*Host // the physical machines it spans; none for a single machine
	Tunnel string  // EGRE or VXLAN; set when there are hosts
	Nodes  []*Node
	Links  []*Link
}

// Host is a physical machine that holds part of a network.
type Host struct {
	Name    string
	Address netip.Addr // underlay IPv4 address: tunnels run between these
	MTU     int        // underlay MTU; links that cross machines get this minus the tunnel's overhead
	Line    int
}

// Node is a virtual host: a container with its own network stack.
type Node struct {
	Name string
	Host string // the machine it must run on; "" lets the plan place it
	// Addresses maps an interface name (a link endpoint's, or "lo") to its CIDR addresses.
	Addresses map[string][]string
	Exec      []string          // shell commands run in order at start, inside the node
	Files     []File            // written into the node's private file system before Exec
	Sysctl    map[string]string // net.* sysctls; forwarding defaults filled in
	Line      int

	addrLine map[string]int // line of each Addresses key, for messages
	hostLine int
}

// File is one file written into a node.
type File struct {
	Path    string // absolute, under one of the node's private writable directories
	Content string // inline, or read from the source path given in the topology file
}

// Link is a virtual link: point-to-point (two endpoints) or a LAN (two or more on a bridge).
type Link struct {
	Name      string
	Endpoints []Endpoint
	Rate      uint64 // bits per second; 0 means no cap
	RateText  string // as written, for display
	MTU       int    // 0 means the kernel default
	Connector string // Shortbridge or Bridge
	Line      int

	MTULine int // line of the mtu, for messages of later layers

	nameLine, endpointsLine, connectorLine int // lines of those keys' values, for messages
}

// Endpoint is one virtual interface on a link.
type Endpoint struct {
	Node   string
	Ifname string
	Line   int
}

func (e Endpoint) String() string { return e.Node + ":" + e.Ifname }

// Node returns the node with the given name, or nil.
func (n *Network) Node(name string) *Node {
	for _, nd := range n.Nodes {
		if nd.Name == name {
			return nd
		}
	}
	return nil
}

// Error is a problem in a topology file. It names where, what, and how to fix it.
type Error struct {
	File  string
	Line  int
	Field string // e.g. links[2].rate
	Msg   string
	Fix   string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, e.Msg)
	if e.Line == 0 { // not known, e.g. an empty file
		s = fmt.Sprintf("%s: %s: %s", e.File, e.Field, e.Msg)
	}
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	return s
}
