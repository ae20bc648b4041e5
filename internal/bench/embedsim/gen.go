// Package embed is the offline simulator of virtual network embedding: it generates the WX100
// workload of the Virne benchmark and a testbed-shaped workload, or replays traces, runs every
// algorithm of internal/plan/placement on the same instances (events by arrival and departure), and
// reports acceptance, long-term revenue to cost, long-term average revenue and solve time, as a
// table and an acceptance-over-time plot.
package embedsim

import (
	"math"
	"math/rand/v2"

	pe "github.com/trellisnet/trellis/internal/plan/placement"
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

// Generate makes the WX100 instance of a seed: Virne's own instance for that seed (experiment
// seed in Virne's settings), drawn in Virne's order from the same streams. Virne seeds
// Python's random and numpy with the seed, draws the substrate's topology (networkx, Python's
// stream), then its node CPU and link bandwidth (numpy); seeds both again, draws every
// request's size, then every lifetime, then every arrival gap (numpy), then request by request
// the topology (networkx) and the node CPU and link bandwidth (numpy).
func (w WX100) Generate(seed uint64) *Instance {
	py, np := newPyRandom(seed), newNumpyRandom(seed)
	in := &Instance{Workload: "wx100", Seed: seed, Problem: pe.VNE}
	in.Sub.Links = waxman(py, w.Nodes, w.Alpha, w.Beta)
	in.Sub.Nodes = make([]pe.Node, w.Nodes)
	for i := range in.Sub.Nodes {
		in.Sub.Nodes[i].CPU = float64(np.randint(w.SubLow, w.SubHigh))
	}
	for i := range in.Sub.Links {
		in.Sub.Links[i].BW = float64(np.randint(w.SubLow, w.SubHigh))
	}
	py, np = newPyRandom(seed), newNumpyRandom(seed)
	in.Requests = make([]pe.Request, w.Requests)
	for i := range in.Requests {
		in.Requests[i].ID = i
		in.Requests[i].Nodes = make([]pe.VNode, np.randint(w.SizeLow, w.SizeHigh))
	}
	for i := range in.Requests {
		in.Requests[i].Lifetime = np.exponential(w.MeanLifetime)
	}
	t := 0.0
	for i := range in.Requests {
		t += float64(np.poisson(1 / w.Rate))
		in.Requests[i].Arrival = t
	}
	for i := range in.Requests {
		r := &in.Requests[i]
		edges := gnp(py, len(r.Nodes), w.LinkProb)
		for j := range r.Nodes {
			r.Nodes[j].CPU = float64(np.randint(w.CPULow, w.CPUHigh))
		}
		for _, e := range edges {
			r.Links = append(r.Links, pe.VLink{A: e[0], B: e[1], BW: float64(np.randint(w.BWLow, w.BWHigh))})
		}
	}
	return in
}

// waxman is networkx's waxman_graph(n, beta=alpha, alpha=beta) as Virne calls it, with its
// draws: points uniform in the unit square (x then y, node by node), L the largest distance
// between two of them, and for each pair u<v in order an edge with probability
// alpha·exp(-d(u,v) / (beta·L)); drawn again until connected.
func waxman(rng *mt19937, n int, alpha, beta float64) []pe.Link {
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

// gnp is networkx's erdos_renyi_graph(n, p) with its draws (one per pair i<j, in order), drawn
// again until connected.
func gnp(rng *mt19937, n int, p float64) [][2]int {
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
