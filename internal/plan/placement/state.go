package placement

import "fmt"

// State is a substrate with its free capacities. Apply and Release are the only ways to change
// them, and Apply refuses anything that would over-commit.
type State struct {
	Problem Problem
	Sub     *Substrate
	CPU     []float64 // free CPU per substrate node
	Mem     []float64 // free memory per substrate node
	NIC     []float64 // free NIC rate per substrate node (Placement)
	BW      []float64 // free bandwidth per substrate link
	Adj     [][]Adj   // neighbours of each substrate node
	paths   map[[2]int][][]int
}

// Adj is one neighbour of a substrate node: the node and the link that leads there.
type Adj struct{ Node, Link int }

// NewState makes a state with every capacity free.
func NewState(p Problem, s *Substrate) (*State, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	st := &State{Problem: p, Sub: s, paths: map[[2]int][][]int{}}
	n := len(s.Nodes)
	st.CPU, st.Mem, st.NIC = make([]float64, n), make([]float64, n), make([]float64, n)
	st.Adj = make([][]Adj, n)
	for i, nd := range s.Nodes {
		st.CPU[i], st.Mem[i], st.NIC[i] = nd.CPU, nd.Mem, nd.NIC
	}
	st.BW = make([]float64, len(s.Links))
	for i, l := range s.Links {
		st.BW[i] = l.BW
		st.Adj[l.A] = append(st.Adj[l.A], Adj{l.B, i})
		st.Adj[l.B] = append(st.Adj[l.B], Adj{l.A, i})
	}
	return st, nil
}

// eps absorbs rounding in float sums of integer-valued demands.
const eps = 1e-9

// Check tells whether e is a complete, feasible embedding of r on the free capacities.
func (st *State) Check(r *Request, e *Embedding) error {
	if e == nil || len(e.Nodes) != len(r.Nodes) {
		return fmt.Errorf("%w: embedding does not map every node", ErrInvalid)
	}
	cpu, mem, nic := map[int]float64{}, map[int]float64{}, map[int]float64{}
	used := map[int]bool{}
	for i, m := range e.Nodes {
		if m < 0 || m >= len(st.CPU) {
			return fmt.Errorf("%w: node %d mapped to %d", ErrInvalid, i, m)
		}
		if r.Nodes[i].Pinned && r.Nodes[i].Pin != m {
			return fmt.Errorf("%w: node %d is pinned to %d, not %d", ErrInvalid, i, r.Nodes[i].Pin, m)
		}
		if st.Problem == VNE && used[m] {
			return fmt.Errorf("%w: substrate node %d holds two nodes of one request", ErrInvalid, m)
		}
		used[m] = true
		cpu[m] += r.Nodes[i].CPU
		mem[m] += r.Nodes[i].Mem
	}
	bw := map[int]float64{}
	for j, l := range r.Links {
		a, b := e.Nodes[l.A], e.Nodes[l.B]
		if st.Problem == Placement {
			if a != b {
				nic[a] += l.BW
				nic[b] += l.BW
			}
			continue
		}
		if j >= len(e.Paths) {
			return fmt.Errorf("%w: link %d has no path", ErrInvalid, j)
		}
		if err := st.checkPath(a, b, e.Paths[j]); err != nil {
			return fmt.Errorf("link %d: %w", j, err)
		}
		for _, k := range e.Paths[j] {
			bw[k] += l.BW
		}
	}
	for m, v := range cpu {
		if v > st.CPU[m]+eps {
			return fmt.Errorf("%w: node %d: cpu: need %g, free %g", ErrNoCapacity, m, v, st.CPU[m])
		}
		if mem[m] > st.Mem[m]+eps {
			return fmt.Errorf("%w: node %d: memory: need %g, free %g", ErrNoCapacity, m, mem[m], st.Mem[m])
		}
	}
	for m, v := range nic {
		if v > st.NIC[m]+eps {
			return fmt.Errorf("%w: node %d: nic: need %g, free %g", ErrNoCapacity, m, v, st.NIC[m])
		}
	}
	for k, v := range bw {
		if v > st.BW[k]+eps {
			return fmt.Errorf("%w: link %d: bw: need %g, free %g", ErrNoCapacity, k, v, st.BW[k])
		}
	}
	return nil
}

// checkPath tells whether the links walk from a to b without repeating a node.
func (st *State) checkPath(a, b int, path []int) error {
	if len(path) == 0 {
		return fmt.Errorf("%w: empty path from %d to %d", ErrInvalid, a, b)
	}
	seen := map[int]bool{a: true}
	at := a
	for _, k := range path {
		if k < 0 || k >= len(st.BW) {
			return fmt.Errorf("%w: no substrate link %d", ErrInvalid, k)
		}
		l := st.Sub.Links[k]
		switch at {
		case l.A:
			at = l.B
		case l.B:
			at = l.A
		default:
			return fmt.Errorf("%w: path breaks at link %d", ErrInvalid, k)
		}
		if seen[at] {
			return fmt.Errorf("%w: path visits node %d twice", ErrInvalid, at)
		}
		seen[at] = true
	}
	if at != b {
		return fmt.Errorf("%w: path ends at %d, not %d", ErrInvalid, at, b)
	}
	return nil
}

// Apply reserves e's resources for r after checking that they are free.
func (st *State) Apply(r *Request, e *Embedding) error {
	if err := st.Check(r, e); err != nil {
		return err
	}
	st.change(r, e, -1)
	return nil
}

// Release gives back what Apply reserved for r.
func (st *State) Release(r *Request, e *Embedding) { st.change(r, e, 1) }

func (st *State) change(r *Request, e *Embedding, sign float64) {
	for i, m := range e.Nodes {
		st.CPU[m] += sign * r.Nodes[i].CPU
		st.Mem[m] += sign * r.Nodes[i].Mem
	}
	for j, l := range r.Links {
		a, b := e.Nodes[l.A], e.Nodes[l.B]
		if st.Problem == Placement {
			if a != b {
				st.NIC[a] += sign * l.BW
				st.NIC[b] += sign * l.BW
			}
			continue
		}
		for _, k := range e.Paths[j] {
			st.BW[k] += sign * l.BW
		}
	}
}

// Algorithm embeds one request on the free capacities of a state without changing them; the
// caller applies the result. An error wraps ErrNoCapacity or ErrRejected.
type Algorithm interface {
	Name() string
	Embed(st *State, r *Request) (*Embedding, error)
}
