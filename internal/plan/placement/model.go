// Package embed places virtual networks onto substrates with finite capacity. It serves two
// problems with one capacity model: standard virtual network embedding (VNE, as the literature
// measures it: one virtual node per substrate node, one substrate path per virtual link with the
// link's bandwidth reserved on every hop) and Trellis placement (many virtual nodes per machine;
// a link inside one machine costs no NIC bandwidth; machines joined by a non-blocking switch, so
// a link between machines costs its rate on the NIC of both). It is pure: no kernel, no I/O.
//
// Algorithms implement Algorithm; State keeps residual capacities and refuses any embedding that
// would over-commit a node, a NIC or a link, whatever the algorithm proposes.
package placement

import (
	"errors"
	"fmt"
)

// Problem says which rules an embedding follows.
type Problem int

const (
	// VNE is standard virtual network embedding: virtual nodes of one request on distinct
	// substrate nodes, each virtual link on one substrate path with bandwidth on every hop.
	VNE Problem = iota
	// Placement is Trellis placement: several virtual nodes may share a machine; a virtual link
	// between two machines uses its rate on both machines' NICs; one inside a machine uses none.
	Placement
)

func (p Problem) String() string {
	if p == Placement {
		return "placement"
	}
	return "vne"
}

// Sentinel errors.
var (
	// ErrNoCapacity: the request does not fit the free capacity (or the algorithm found no way).
	ErrNoCapacity = errors.New("not enough capacity")
	// ErrRejected: the algorithm's admission control declined a request that might have fitted.
	ErrRejected = errors.New("rejected by admission control")
	// ErrInvalid: a request, substrate or embedding is malformed.
	ErrInvalid = errors.New("invalid")
)

// Node is a substrate node (a machine). NIC is its network rate (Placement only).
type Node struct {
	Name string  `json:"name,omitempty"`
	CPU  float64 `json:"cpu"`
	Mem  float64 `json:"mem,omitempty"`
	NIC  float64 `json:"nic,omitempty"`
}

// Link is an undirected substrate link with bandwidth BW between nodes A and B.
type Link struct {
	A  int     `json:"a"`
	B  int     `json:"b"`
	BW float64 `json:"bw"`
}

// Substrate is the network that hosts requests.
type Substrate struct {
	Nodes []Node `json:"nodes"`
	Links []Link `json:"links"`
}

// VNode is a virtual node's demand. If Pinned, it must go on substrate node Pin.
type VNode struct {
	Name   string  `json:"name,omitempty"`
	CPU    float64 `json:"cpu"`
	Mem    float64 `json:"mem,omitempty"`
	Pinned bool    `json:"-"`
	Pin    int     `json:"-"`
}

// VLink is a virtual link between virtual nodes A and B (indices into the request's nodes).
type VLink struct {
	A  int     `json:"a"`
	B  int     `json:"b"`
	BW float64 `json:"bw"`
}

// Request is a virtual network that arrives at Arrival and holds its resources for Lifetime.
type Request struct {
	ID       int     `json:"id"`
	Arrival  float64 `json:"arrival"`
	Lifetime float64 `json:"lifetime"`
	Nodes    []VNode `json:"nodes"`
	Links    []VLink `json:"links"`
}

// Embedding maps a request: Nodes[i] is the substrate node of virtual node i; Paths[j] lists the
// substrate link indices that carry virtual link j (VNE; empty in Placement).
type Embedding struct {
	Nodes []int
	Paths [][]int
}

// Revenue is Σ CPU of the virtual nodes + Σ bandwidth of the virtual links.
func (r *Request) Revenue() float64 {
	s := 0.0
	for _, n := range r.Nodes {
		s += n.CPU
	}
	for _, l := range r.Links {
		s += l.BW
	}
	return s
}

// Cost is Σ CPU + Σ bandwidth × hops (VNE); in Placement a link between machines counts one hop
// and a link inside a machine none.
func (r *Request) Cost(e *Embedding) float64 {
	s := 0.0
	for _, n := range r.Nodes {
		s += n.CPU
	}
	for j, l := range r.Links {
		if e.Paths != nil && j < len(e.Paths) && len(e.Paths[j]) > 0 {
			s += l.BW * float64(len(e.Paths[j]))
		} else if e.Nodes[l.A] != e.Nodes[l.B] {
			s += l.BW
		}
	}
	return s
}

// CrossBW is the bandwidth of the virtual links whose ends sit on different substrate nodes.
func (r *Request) CrossBW(e *Embedding) float64 {
	s := 0.0
	for _, l := range r.Links {
		if e.Nodes[l.A] != e.Nodes[l.B] {
			s += l.BW
		}
	}
	return s
}

// Validate checks that the substrate's links join existing nodes and capacities are not negative.
func (s *Substrate) Validate() error {
	if len(s.Nodes) == 0 {
		return fmt.Errorf("%w: substrate: no nodes", ErrInvalid)
	}
	for i, n := range s.Nodes {
		if n.CPU < 0 || n.Mem < 0 || n.NIC < 0 {
			return fmt.Errorf("%w: substrate node %d: negative capacity", ErrInvalid, i)
		}
	}
	for i, l := range s.Links {
		if l.A < 0 || l.A >= len(s.Nodes) || l.B < 0 || l.B >= len(s.Nodes) || l.A == l.B {
			return fmt.Errorf("%w: substrate link %d: ends %d-%d must be two distinct nodes in 0..%d", ErrInvalid, i, l.A, l.B, len(s.Nodes)-1)
		}
		if l.BW < 0 {
			return fmt.Errorf("%w: substrate link %d: negative bw", ErrInvalid, i)
		}
	}
	return nil
}

// Validate checks that the request's links join existing nodes and demands are not negative.
func (r *Request) Validate() error {
	if len(r.Nodes) == 0 {
		return fmt.Errorf("%w: request %d: no nodes", ErrInvalid, r.ID)
	}
	for i, n := range r.Nodes {
		if n.CPU < 0 || n.Mem < 0 {
			return fmt.Errorf("%w: request %d node %d: negative demand", ErrInvalid, r.ID, i)
		}
	}
	for i, l := range r.Links {
		if l.A < 0 || l.A >= len(r.Nodes) || l.B < 0 || l.B >= len(r.Nodes) || l.A == l.B {
			return fmt.Errorf("%w: request %d link %d: ends %d-%d must be two distinct nodes in 0..%d", ErrInvalid, r.ID, i, l.A, l.B, len(r.Nodes)-1)
		}
		if l.BW < 0 {
			return fmt.Errorf("%w: request %d link %d: negative bw", ErrInvalid, r.ID, i)
		}
	}
	return nil
}
