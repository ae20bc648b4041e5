package placement

import (
	"fmt"
	"math"
	"sort"
)

// GRC is GRC-Rank (Gong et al., "Toward profit-seeking virtual network embedding algorithm via
// global resource capacity", INFOCOM 2014) as Virne implements it: rank the virtual and the
// substrate nodes by global resource capacity, map the virtual nodes in rank order, each to the
// highest-ranked substrate node that is unused by the request and has the CPU; then route the
// virtual links in order, each on the first of the K shortest substrate paths (by hops, on the
// whole substrate) whose every link has the bandwidth.
type GRC struct {
	D     float64 // damping, 0.85
	Sigma float64 // convergence threshold, 1e-5
	K     int     // candidate paths per virtual link, 10
}

// NewGRC is GRC-Rank with the published parameters.
func NewGRC() *GRC { return &GRC{D: 0.85, Sigma: 1e-5, K: 10} }

// Name implements Algorithm.
func (g *GRC) Name() string { return "grc-rank" }

// GRCRank computes the GRC vector r = (1-d)·c + d·M·r, where c is each node's share of the total
// capacity and M[u][v] = bw(u,v) / Σ_w bw(w,v), iterated from r = c until the change (L2) is
// below sigma. A node with no bandwidth spreads nothing (networkx leaves a zero row of M at
// zero). With no capacity at all every rank is 0, so byRank keeps index order, as Virne's NaN
// ranks do.
func GRCRank(cap []float64, links []VLink, d, sigma float64) []float64 {
	n := len(cap)
	c := make([]float64, n)
	total := 0.0
	for _, v := range cap {
		total += v
	}
	if total == 0 { // Virne's c = cap / Σcap is NaN throughout: every node ranks alike
		return c
	}
	for i, v := range cap {
		c[i] = v / total
	}
	deg := make([]float64, n)
	for _, l := range links {
		deg[l.A] += l.BW
		deg[l.B] += l.BW
	}
	r := append([]float64(nil), c...)
	next := make([]float64, n)
	for iter := 0; iter < 10000; iter++ {
		for i := range next {
			next[i] = (1 - d) * c[i]
		}
		for _, l := range links {
			if deg[l.A] > 0 {
				next[l.B] += d * r[l.A] * l.BW / deg[l.A]
			}
			if deg[l.B] > 0 {
				next[l.A] += d * r[l.B] * l.BW / deg[l.B]
			}
		}
		delta := 0.0
		for i := range r {
			delta += (next[i] - r[i]) * (next[i] - r[i])
		}
		r, next = next, r
		if math.Sqrt(delta) < sigma {
			break
		}
	}
	return r
}

// byRank lists indices by rank, highest first; ties keep index order.
func byRank(rank []float64) []int {
	idx := make([]int, len(rank))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return rank[idx[a]] > rank[idx[b]] })
	return idx
}

// substrateRank is the GRC rank of the substrate on its free capacities.
func substrateRank(st *State, d, sigma float64) []float64 {
	links := make([]VLink, len(st.Sub.Links))
	for i, l := range st.Sub.Links {
		links[i] = VLink{A: l.A, B: l.B, BW: st.BW[i]}
	}
	return GRCRank(st.CPU, links, d, sigma)
}

// Embed implements Algorithm.
func (g *GRC) Embed(st *State, r *Request) (*Embedding, error) {
	if st.Problem != VNE {
		return nil, fmt.Errorf("%w: grc-rank solves vne only", ErrInvalid)
	}
	vcap := make([]float64, len(r.Nodes))
	for i, n := range r.Nodes {
		vcap[i] = n.CPU
	}
	vorder := byRank(GRCRank(vcap, r.Links, g.D, g.Sigma))
	porder := byRank(substrateRank(st, g.D, g.Sigma))
	e := &Embedding{Nodes: make([]int, len(r.Nodes)), Paths: make([][]int, len(r.Links))}
	taken := make([]bool, len(st.CPU))
	for _, v := range vorder {
		placed := false
		for _, p := range porder {
			if !taken[p] && st.CPU[p]+eps >= r.Nodes[v].CPU && st.Mem[p]+eps >= r.Nodes[v].Mem {
				e.Nodes[v], taken[p], placed = p, true, true
				break
			}
		}
		if !placed {
			return nil, fmt.Errorf("%w: node %d: no substrate node with cpu %g", ErrNoCapacity, v, r.Nodes[v].CPU)
		}
	}
	used := make([]float64, len(st.BW))
	for j, l := range r.Links {
		routed := false
		for _, path := range st.KShortest(e.Nodes[l.A], e.Nodes[l.B], g.K) {
			if fits(st, used, path, l.BW) {
				for _, k := range path {
					used[k] += l.BW
				}
				e.Paths[j], routed = path, true
				break
			}
		}
		if !routed {
			return nil, fmt.Errorf("%w: link %d: none of %d shortest paths has bw %g", ErrNoCapacity, j, g.K, l.BW)
		}
	}
	return e, nil
}

// fits tells whether every link of path has bw free beyond used.
func fits(st *State, used []float64, path []int, bw float64) bool {
	for _, k := range path {
		if st.BW[k]-used[k]+eps < bw {
			return false
		}
	}
	return true
}
