package placement

import (
	"errors"
	"fmt"
	"math"
)

// Machine is a machine Trellis may place nodes on. A zero Memory or NIC means not limited.
// Pinned lists nodes that must run there (as Node.Machine does).
type Machine struct {
	Name   string
	Cores  float64
	Memory float64
	NIC    float64 // rate, in the unit of Link.Rate
	Pinned []string
}

// NetNode is a node of a network to place, with an optional Machine it must run on.
type NetNode struct {
	Name    string
	CPU     float64 // cores
	Memory  float64
	Machine string
}

// NetLink joins two nodes by name at Rate.
type NetLink struct {
	A, B string
	Rate float64
}

// PlaceNetwork places the nodes of one network on machines joined by a switch: pinned nodes
// stay on their machine, every machine's cores, memory and NIC rate are respected (a link
// inside a machine costs no NIC rate), and cross-machine rate is kept low. It returns node name
// → machine name, or an error wrapping ErrNoCapacity that names the machine and the resource
// that is short ("machine m1: memory: need 4096, free 1024"), or ErrInvalid for a bad input.
func PlaceNetwork(machines []Machine, nodes []NetNode, links []NetLink) (map[string]string, error) {
	if len(machines) == 0 {
		return nil, fmt.Errorf("%w: no machines", ErrInvalid)
	}
	sub := &Substrate{}
	mindex := map[string]int{}
	pinned := map[string]string{}
	for i, m := range machines {
		if _, dup := mindex[m.Name]; dup || m.Name == "" {
			return nil, fmt.Errorf("%w: machine %d: name %q empty or repeated", ErrInvalid, i, m.Name)
		}
		mindex[m.Name] = i
		sub.Nodes = append(sub.Nodes, Node{Name: m.Name, CPU: m.Cores, Mem: unlimited(m.Memory), NIC: unlimited(m.NIC)})
		for _, n := range m.Pinned {
			pinned[n] = m.Name
		}
	}
	req := &Request{}
	nindex := map[string]int{}
	for i, n := range nodes {
		if _, dup := nindex[n.Name]; dup || n.Name == "" {
			return nil, fmt.Errorf("%w: node %d: name %q empty or repeated", ErrInvalid, i, n.Name)
		}
		nindex[n.Name] = i
		v := VNode{Name: n.Name, CPU: n.CPU, Mem: n.Memory}
		want := n.Machine
		if p, ok := pinned[n.Name]; ok {
			if want != "" && want != p {
				return nil, fmt.Errorf("%w: node %s: pinned to both %s and %s", ErrInvalid, n.Name, want, p)
			}
			want = p
		}
		if want != "" {
			m, ok := mindex[want]
			if !ok {
				return nil, fmt.Errorf("%w: node %s: no machine named %q", ErrInvalid, n.Name, want)
			}
			v.Pinned, v.Pin = true, m
		}
		req.Nodes = append(req.Nodes, v)
	}
	for i, l := range links {
		a, okA := nindex[l.A]
		b, okB := nindex[l.B]
		if !okA || !okB {
			return nil, fmt.Errorf("%w: link %d: %s-%s: no such node", ErrInvalid, i, l.A, l.B)
		}
		req.Links = append(req.Links, VLink{A: a, B: b, BW: l.Rate})
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	st, err := NewState(Placement, sub)
	if err != nil {
		return nil, err
	}
	e, err := Pack{}.Embed(st, req)
	if err != nil {
		return nil, nameNodes(err, req)
	}
	if err := st.Check(req, e); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(nodes))
	for i, m := range e.Nodes {
		out[nodes[i].Name] = machines[m].Name
	}
	return out, nil
}

func unlimited(v float64) float64 {
	if v == 0 {
		return math.Inf(1)
	}
	return v
}

// nameNodes rewrites "node 3: ..." into "node r3: ..." for the caller.
func nameNodes(err error, r *Request) error {
	var v int
	if _, scanErr := fmt.Sscanf(err.Error(), "node %d:", &v); scanErr == nil && v < len(r.Nodes) {
		return fmt.Errorf("node %s: %w", r.Nodes[v].Name, errors.Unwrap(err))
	}
	return err
}
