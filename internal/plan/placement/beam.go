package placement

import (
	"fmt"
	"slices"
	"sort"
)

// Beam is our VNE algorithm: joint node and link mapping by beam search. Virtual nodes are
// taken in breadth-first order from the heaviest one; a partial embedding grows by placing the
// next virtual node on a substrate node and routing at once every virtual link to its already
// placed neighbours on a fewest-hop path among the links that still have the bandwidth (taking
// the partial embedding's own use into account). The Width cheapest partial embeddings
// (Σ bandwidth × hops) survive each step; the search starts from the Roots substrate nodes
// with the most free capacity around them. Admission control refuses a request whose best
// embedding has revenue / cost below MinRC.
type Beam struct {
	Width int     // partial embeddings kept per step
	Roots int     // substrate nodes tried for the first virtual node
	MinRC float64 // admission threshold on revenue / cost, 0: accept whatever fits
}

// NewBeam is Beam with the settings measured in docs/embedding.md.
func NewBeam() *Beam { return &Beam{Width: 8, Roots: 16} }

// Name implements Algorithm.
func (b *Beam) Name() string {
	if b.MinRC > 0 {
		return fmt.Sprintf("beam-%d-rc%.2f", b.Width, b.MinRC)
	}
	return fmt.Sprintf("beam-%d", b.Width)
}

type partial struct {
	nodes []int     // substrate node per virtual node, -1 before placement
	paths [][]int   // per virtual link
	used  []float64 // bandwidth this embedding takes per substrate link
	taken map[int]bool
	cost  float64 // Σ bw × hops so far
}

func (p *partial) clone() *partial {
	q := &partial{nodes: slices.Clone(p.nodes), paths: slices.Clone(p.paths), used: slices.Clone(p.used),
		taken: make(map[int]bool, len(p.taken)+1), cost: p.cost}
	for k := range p.taken {
		q.taken[k] = true
	}
	return q
}

// bfsOrder lists the virtual nodes breadth-first from the heaviest, heavier neighbours first;
// every component is visited.
func bfsOrder(r *Request) []int {
	w := make([]float64, len(r.Nodes))
	nb := make([][]int, len(r.Nodes))
	for i, n := range r.Nodes {
		w[i] = n.CPU
	}
	for _, l := range r.Links {
		w[l.A] += l.BW
		w[l.B] += l.BW
		nb[l.A] = append(nb[l.A], l.B)
		nb[l.B] = append(nb[l.B], l.A)
	}
	seen := make([]bool, len(r.Nodes))
	var order []int
	for len(order) < len(r.Nodes) {
		start := -1
		for i := range r.Nodes {
			if !seen[i] && (start < 0 || w[i] > w[start]) {
				start = i
			}
		}
		seen[start] = true
		q := []int{start}
		for h := 0; h < len(q); h++ {
			u := q[h]
			order = append(order, u)
			next := slices.Clone(nb[u])
			sort.SliceStable(next, func(a, b int) bool { return w[next[a]] > w[next[b]] })
			for _, v := range next {
				if !seen[v] {
					seen[v] = true
					q = append(q, v)
				}
			}
		}
	}
	return order
}

// Embed implements Algorithm.
func (b *Beam) Embed(st *State, r *Request) (*Embedding, error) {
	if st.Problem != VNE {
		return nil, fmt.Errorf("%w: beam solves vne only", ErrInvalid)
	}
	order := bfsOrder(r)
	beam := []*partial{{nodes: filled(len(r.Nodes), -1), paths: make([][]int, len(r.Links)),
		used: make([]float64, len(st.BW)), taken: map[int]bool{}}}
	sc := newScratch(len(st.CPU))
	for step, v := range order {
		var next []*partial
		for _, p := range beam {
			next = append(next, b.expand(st, r, p, v, step == 0, sc)...)
		}
		if len(next) == 0 {
			return nil, fmt.Errorf("%w: virtual node %d (cpu %g) and its links fit nowhere", ErrNoCapacity, v, r.Nodes[v].CPU)
		}
		sort.SliceStable(next, func(i, j int) bool { return next[i].cost < next[j].cost })
		beam = next[:min(len(next), b.Width)]
	}
	best := beam[0]
	e := &Embedding{Nodes: best.nodes, Paths: best.paths}
	if b.MinRC > 0 {
		if rc := r.Revenue() / r.Cost(e); rc < b.MinRC {
			return nil, fmt.Errorf("%w: revenue/cost %.2f < %.2f", ErrRejected, rc, b.MinRC)
		}
	}
	return e, nil
}

func filled(n, v int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

type scratch struct {
	dist, prev [][]int
	queue      []int
}

func newScratch(n int) *scratch { return &scratch{queue: make([]int, 0, n)} }

func (s *scratch) ensure(k, n int) {
	for len(s.dist) < k {
		s.dist = append(s.dist, make([]int, n))
		s.prev = append(s.prev, make([]int, n))
	}
}
