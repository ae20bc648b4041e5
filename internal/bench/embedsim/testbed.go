package embedsim

import (
	"math/rand/v2"

	pe "github.com/trellisnet/trellis/internal/plan/placement"
)

// Testbed are the parameters of the testbed-shaped workload (docs/embedding.md): a few fat
// machines on a non-blocking switch, virtual networks of 10–500 nodes that may share a machine.
type Testbed struct {
	MachinesLow, MachinesHigh     int       // machines, uniform integers, 4..32
	Cores                         []float64 // cores per machine, one of these uniformly: 8, 16, 32, 64
	MemPerCoreLow, MemPerCoreHigh int       // GiB of memory per core, uniform integer, 4..8 (32–512 GiB)
	NICs                          []float64 // NIC rate per machine in Mbit/s, one of: 10, 25, 40, 100 Gbit/s
	Requests                      int       // 200
	SizeLow, SizeHigh             int       // nodes per network, uniform integers, 10..500
	Attach                        int       // Barabási–Albert: each new node links to this many, 2
	CPULow, CPUHigh               int       // node CPU in tenths of a core, uniform, 1..10
	MemLow, MemHigh               int       // node memory in MiB/64, uniform, 1..8 (64–512 MiB)
	RateLow, RateHigh             int       // link rate in units of 10 Mbit/s, uniform, 1..100
	MeanLifetime                  float64   // exponential, 500
	Load                          float64   // offered CPU load ρ: arrival rate = ρ·cores / (lifetime·mean CPU of a network), 1.0
}

// DefaultTestbed is the testbed-shaped workload reported beside WX100.
func DefaultTestbed() Testbed {
	return Testbed{MachinesLow: 4, MachinesHigh: 32, Cores: []float64{8, 16, 32, 64},
		MemPerCoreLow: 4, MemPerCoreHigh: 8, NICs: []float64{10000, 25000, 40000, 100000},
		Requests: 200, SizeLow: 10, SizeHigh: 500, Attach: 2, CPULow: 1, CPUHigh: 10,
		MemLow: 1, MemHigh: 8, RateLow: 1, RateHigh: 100, MeanLifetime: 500, Load: 0.8}
}

// Generate makes the testbed instance of a seed. Memory is in MiB, rates in Mbit/s.
func (w Testbed) Generate(seed uint64) *Instance {
	rng := rand.New(rand.NewPCG(seed, 0x54455354))
	in := &Instance{Workload: "testbed", Seed: seed, Problem: pe.Placement}
	m := uniformInt(rng, w.MachinesLow, w.MachinesHigh)
	cores := 0.0
	for i := 0; i < m; i++ {
		c := w.Cores[rng.IntN(len(w.Cores))]
		mem := c * float64(uniformInt(rng, w.MemPerCoreLow, w.MemPerCoreHigh)) * 1024
		in.Sub.Nodes = append(in.Sub.Nodes, pe.Node{Name: machineName(i), CPU: c, Mem: mem, NIC: w.NICs[rng.IntN(len(w.NICs))]})
		cores += c
	}
	meanSize := float64(w.SizeLow+w.SizeHigh) / 2
	meanCPU := float64(w.CPULow+w.CPUHigh) / 20
	rate := w.Load * cores / (w.MeanLifetime * meanSize * meanCPU)
	t := 0.0
	for i := 0; i < w.Requests; i++ {
		t += rng.ExpFloat64() / rate
		n := uniformInt(rng, w.SizeLow, w.SizeHigh)
		r := pe.Request{ID: i, Arrival: t, Lifetime: rng.ExpFloat64() * w.MeanLifetime, Nodes: make([]pe.VNode, n)}
		for j := range r.Nodes {
			r.Nodes[j].CPU = float64(uniformInt(rng, w.CPULow, w.CPUHigh)) / 10
			r.Nodes[j].Mem = float64(uniformInt(rng, w.MemLow, w.MemHigh)) * 64
		}
		for _, e := range barabasiAlbert(rng, n, w.Attach) {
			r.Links = append(r.Links, pe.VLink{A: e[0], B: e[1], BW: float64(uniformInt(rng, w.RateLow, w.RateHigh))})
		}
		in.Requests = append(in.Requests, r)
	}
	return in
}

func machineName(i int) string {
	return "m" + string(rune('0'+i/10)) + string(rune('0'+i%10))
}

// barabasiAlbert grows a connected graph: it starts from a clique of k+1 nodes (a path if n is
// smaller); every next node links to k distinct earlier nodes chosen with probability
// proportional to their degree.
func barabasiAlbert(rng *rand.Rand, n, k int) [][2]int {
	var edges [][2]int
	var ends []int // every edge end once: picking from it is picking by degree
	seed := min(n, k+1)
	for i := 0; i < seed; i++ {
		for j := i + 1; j < seed; j++ {
			edges = append(edges, [2]int{i, j})
			ends = append(ends, i, j)
		}
	}
	for v := seed; v < n; v++ {
		chosen := map[int]bool{}
		var order []int
		for len(chosen) < min(k, v) {
			u := ends[rng.IntN(len(ends))]
			if !chosen[u] {
				chosen[u] = true
				order = append(order, u)
			}
		}
		for _, u := range order {
			edges = append(edges, [2]int{u, v})
			ends = append(ends, u, v)
		}
	}
	return edges
}
