// Package embed is the offline simulator of virtual network embedding: it generates the WX100
// workload of the Virne benchmark and a testbed-shaped workload, or replays traces, runs every
// algorithm of internal/plan/embed on the same instances (events by arrival and departure), and
// reports acceptance, long-term revenue to cost, long-term average revenue and solve time, as a
// table and an acceptance-over-time plot.
package embed

import (
	"math"
	"math/rand/v2"

	pe "github.com/trellisnet/trellis/internal/plan/embed"
)

// Instance is one substrate and the requests that arrive on it, in arrival order.
type Instance struct {
	Workload string
	Seed     uint64
	Problem  pe.Problem
	Sub      pe.Substrate
	Requests []pe.Request
}

// WX100 are the parameters of Virne's WX100 scenario.
type WX100 struct {
	Nodes             int     // substrate nodes, 100
	Alpha, Beta       float64 // Waxman: p = Alpha·exp(-d / (Beta·L)), 0.5 and 0.2
	SubLow, SubHigh   int     // substrate CPU and bandwidth, uniform integers, 50..100
	Requests          int     // 1000
	SizeLow, SizeHigh int     // virtual nodes per request, 2..10
	LinkProb          float64 // request topology: G(n, p) until connected, 0.5
	CPULow, CPUHigh   int     // virtual node CPU, 0..20
	BWLow, BWHigh     int     // virtual link bandwidth, 0..50
	MeanLifetime      float64 // exponential, 500
	Rate              float64 // arrivals per time unit, 0.16: gaps are Poisson(1/Rate) integers
}

// DefaultWX100 is the scenario of Virne's Table 3.
func DefaultWX100() WX100 {
	return WX100{Nodes: 100, Alpha: 0.5, Beta: 0.2, SubLow: 50, SubHigh: 100, Requests: 1000,
		SizeLow: 2, SizeHigh: 10, LinkProb: 0.5, CPULow: 0, CPUHigh: 20, BWLow: 0, BWHigh: 50,
		MeanLifetime: 500, Rate: 0.16}
}

// uniformInt draws an integer in [lo, hi], both included (numpy's randint(lo, hi+1)).
func uniformInt(rng *rand.Rand, lo, hi int) int { return lo + rng.IntN(hi-lo+1) }

// poisson draws from a Poisson distribution of mean lambda (Knuth; lambda is small here).
func poisson(rng *rand.Rand, lambda float64) int {
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// Generate makes the WX100 instance of a seed.
func (w WX100) Generate(seed uint64) *Instance {
	rng := rand.New(rand.NewPCG(seed, 0x5758313030))
	in := &Instance{Workload: "wx100", Seed: seed, Problem: pe.VNE}
	in.Sub.Links = waxman(rng, w.Nodes, w.Alpha, w.Beta)
	in.Sub.Nodes = make([]pe.Node, w.Nodes)
	for i := range in.Sub.Nodes {
		in.Sub.Nodes[i].CPU = float64(uniformInt(rng, w.SubLow, w.SubHigh))
	}
	for i := range in.Sub.Links {
		in.Sub.Links[i].BW = float64(uniformInt(rng, w.SubLow, w.SubHigh))
	}
	t := 0.0
	for i := 0; i < w.Requests; i++ {
		n := uniformInt(rng, w.SizeLow, w.SizeHigh)
		r := pe.Request{ID: i, Lifetime: rng.ExpFloat64() * w.MeanLifetime}
		t += float64(poisson(rng, 1/w.Rate))
		r.Arrival = t
		for _, e := range gnp(rng, n, w.LinkProb) {
			r.Links = append(r.Links, pe.VLink{A: e[0], B: e[1], BW: float64(uniformInt(rng, w.BWLow, w.BWHigh))})
		}
		r.Nodes = make([]pe.VNode, n)
		for j := range r.Nodes {
			r.Nodes[j].CPU = float64(uniformInt(rng, w.CPULow, w.CPUHigh))
		}
		in.Requests = append(in.Requests, r)
	}
	return in
}

// waxman is networkx's waxman_graph(n, beta=alpha, alpha=beta) as Virne calls it: points uniform
// in the unit square, L the largest distance between two of them, and an edge between u and v
// with probability alpha·exp(-d(u,v) / (beta·L)); drawn again until connected.
func waxman(rng *rand.Rand, n int, alpha, beta float64) []pe.Link {
	for {
		x, y := make([]float64, n), make([]float64, n)
		for i := range x {
			x[i], y[i] = rng.Float64(), rng.Float64()
		}
		l := 0.0
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				l = math.Max(l, math.Hypot(x[i]-x[j], y[i]-y[j]))
			}
		}
		var links []pe.Link
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				if rng.Float64() < alpha*math.Exp(-math.Hypot(x[i]-x[j], y[i]-y[j])/(beta*l)) {
					links = append(links, pe.Link{A: i, B: j})
				}
			}
		}
		edges := make([][2]int, len(links))
		for i, e := range links {
			edges[i] = [2]int{e.A, e.B}
		}
		if connected(n, edges) {
			return links
		}
	}
}

// gnp is an Erdős–Rényi G(n, p) graph (pairs i<j in order), drawn again until connected.
func gnp(rng *rand.Rand, n int, p float64) [][2]int {
	for {
		var edges [][2]int
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				if rng.Float64() < p {
					edges = append(edges, [2]int{i, j})
				}
			}
		}
		if connected(n, edges) {
			return edges
		}
	}
}

// connected tells whether the graph on n nodes is connected.
func connected(n int, edges [][2]int) bool {
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	find := func(a int) int {
		for parent[a] != a {
			parent[a] = parent[parent[a]]
			a = parent[a]
		}
		return a
	}
	parts := n
	for _, e := range edges {
		if a, b := find(e[0]), find(e[1]); a != b {
			parent[a] = b
			parts--
		}
	}
	return parts == 1
}
