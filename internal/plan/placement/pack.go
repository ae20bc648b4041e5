package placement

import (
	"fmt"
	"math"
	"slices"
)

// Pack is our Trellis placement algorithm. Pinned virtual nodes go first to their machine; the
// others follow in breadth-first order from the heaviest, each to the machine that adds the
// least NIC bandwidth (links to neighbours already placed elsewhere), among the machines with
// the CPU, memory and NIC rate left; ties go to the machine with the most free CPU share, which
// spreads load when nothing binds nodes together. It never splits what fits on one machine
// just to balance load: a link inside a machine is free.
type Pack struct{}

// Name implements Algorithm.
func (Pack) Name() string { return "pack" }

// Embed implements Algorithm.
func (Pack) Embed(st *State, r *Request) (*Embedding, error) {
	if st.Problem != Placement {
		return nil, fmt.Errorf("%w: pack solves placement only", ErrInvalid)
	}
	n := len(st.CPU)
	cpu, mem, nic := make([]float64, n), make([]float64, n), make([]float64, n)
	copy(cpu, st.CPU)
	copy(mem, st.Mem)
	copy(nic, st.NIC)
	e := &Embedding{Nodes: filled(len(r.Nodes), -1)}
	nb := make([][]int, len(r.Nodes)) // link indices per virtual node
	for j, l := range r.Links {
		nb[l.A] = append(nb[l.A], j)
		nb[l.B] = append(nb[l.B], j)
	}
	var order []int
	for i, v := range r.Nodes {
		if v.Pinned {
			order = append(order, i)
		}
	}
	for _, i := range bfsOrder(r) {
		if !r.Nodes[i].Pinned {
			order = append(order, i)
		}
	}
	for _, v := range order {
		best, bestScore := -1, math.Inf(1)
		var short error
		shortFree := math.Inf(-1)
		for m := 0; m < n; m++ {
			if r.Nodes[v].Pinned && r.Nodes[v].Pin != m {
				continue
			}
			add, err := fitsOn(st, r, e, v, m, nb[v], cpu, mem, nic)
			if err != nil {
				// report the machine with the most free CPU: the likeliest home
				if cpu[m] > shortFree {
					short, shortFree = err, cpu[m]
				}
				continue
			}
			score := add - 1e-6*ratio(cpu[m]-r.Nodes[v].CPU, st.Sub.Nodes[m].CPU)
			if score < bestScore {
				best, bestScore = m, score
			}
		}
		if best < 0 {
			return nil, fmt.Errorf("node %d: %w", v, short)
		}
		take(r, e, v, best, nb[v], cpu, mem, nic)
	}
	if len(r.Nodes) <= improveLimit {
		improve(st, r, e, nb, 4)
	}
	return e, nil
}

// improveLimit is the largest network whose placement Pack improves by local search.
const improveLimit = 1000

// fitsOn tells how much NIC bandwidth placing v on m adds, or what is short.
func fitsOn(st *State, r *Request, e *Embedding, v, m int, links []int, cpu, mem, nic []float64) (float64, error) {
	d := r.Nodes[v]
	name := st.machineName(m)
	if d.CPU > cpu[m]+eps {
		return 0, fmt.Errorf("%w: machine %s: cpu: need %g, free %g", ErrNoCapacity, name, d.CPU, cpu[m])
	}
	if d.Mem > mem[m]+eps {
		return 0, fmt.Errorf("%w: machine %s: memory: need %g, free %g", ErrNoCapacity, name, d.Mem, mem[m])
	}
	add := 0.0
	other := map[int]float64{}
	for _, j := range links {
		l := r.Links[j]
		o := e.Nodes[l.A]
		if l.A == v {
			o = e.Nodes[l.B]
		}
		if o >= 0 && o != m {
			add += l.BW
			other[o] += l.BW
		}
	}
	if add > nic[m]+eps {
		return 0, fmt.Errorf("%w: machine %s: nic: need %g, free %g", ErrNoCapacity, name, add, nic[m])
	}
	for o, bw := range other {
		if bw > nic[o]+eps {
			return 0, fmt.Errorf("%w: machine %s: nic: need %g, free %g", ErrNoCapacity, st.machineName(o), bw, nic[o])
		}
	}
	return add, nil
}

// take places v on m and charges the free capacities.
func take(r *Request, e *Embedding, v, m int, links []int, cpu, mem, nic []float64) {
	e.Nodes[v] = m
	cpu[m] -= r.Nodes[v].CPU
	mem[m] -= r.Nodes[v].Mem
	for _, j := range links {
		l := r.Links[j]
		o := e.Nodes[l.A]
		if l.A == v {
			o = e.Nodes[l.B]
		}
		if o >= 0 && o != m {
			nic[m] -= l.BW
			nic[o] -= l.BW
		}
	}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// machineName is a substrate node's name, or its index if it has none.
func (st *State) machineName(m int) string {
	if n := st.Sub.Nodes[m].Name; n != "" {
		return n
	}
	return fmt.Sprint(m)
}

// Spread is the baseline for Trellis placement: every node goes to the machine with the largest
// share of free CPU that can hold it (links ignored), as a load balancer would.
type Spread struct{}

// Name implements Algorithm.
func (Spread) Name() string { return "spread" }

// Embed implements Algorithm.
func (Spread) Embed(st *State, r *Request) (*Embedding, error) {
	if st.Problem != Placement {
		return nil, fmt.Errorf("%w: spread solves placement only", ErrInvalid)
	}
	n := len(st.CPU)
	cpu, mem, nic := slices.Clone(st.CPU), slices.Clone(st.Mem), slices.Clone(st.NIC)
	e := &Embedding{Nodes: filled(len(r.Nodes), -1)}
	nb := make([][]int, len(r.Nodes))
	for j, l := range r.Links {
		nb[l.A] = append(nb[l.A], j)
		nb[l.B] = append(nb[l.B], j)
	}
	for v := range r.Nodes {
		best := -1
		var short error
		for m := 0; m < n; m++ {
			if r.Nodes[v].Pinned && r.Nodes[v].Pin != m {
				continue
			}
			if _, err := fitsOn(st, r, e, v, m, nb[v], cpu, mem, nic); err != nil {
				short = err
				continue
			}
			if best < 0 || ratio(cpu[m], st.Sub.Nodes[m].CPU) > ratio(cpu[best], st.Sub.Nodes[best].CPU) {
				best = m
			}
		}
		if best < 0 {
			return nil, fmt.Errorf("node %d: %w", v, short)
		}
		take(r, e, v, best, nb[v], cpu, mem, nic)
	}
	return e, nil
}
