package embedsim

import (
	"math"
	"testing"
)

// stats are the mean, minimum and maximum of xs.
func stats(xs []float64) (mean, lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		mean += x
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return mean / float64(len(xs)), lo, hi
}

func TestWX100Distributions(t *testing.T) {
	w := DefaultWX100()
	var sizes, cpu, bw, life, gaps, subCPU, subBW, links, vlinkShare []float64
	for _, seed := range []uint64{1, 2, 3, 4, 5} {
		in := w.Generate(seed)
		if len(in.Requests) != 1000 || len(in.Sub.Nodes) != 100 {
			t.Fatalf("%d requests on %d nodes", len(in.Requests), len(in.Sub.Nodes))
		}
		links = append(links, float64(len(in.Sub.Links)))
		for _, n := range in.Sub.Nodes {
			subCPU = append(subCPU, n.CPU)
		}
		for _, l := range in.Sub.Links {
			subBW = append(subBW, l.BW)
		}
		prev := 0.0
		for _, r := range in.Requests {
			n := float64(len(r.Nodes))
			sizes = append(sizes, n)
			life = append(life, r.Lifetime)
			gaps = append(gaps, r.Arrival-prev)
			prev = r.Arrival
			vlinkShare = append(vlinkShare, float64(len(r.Links))/(n*(n-1)/2))
			for _, v := range r.Nodes {
				cpu = append(cpu, v.CPU)
			}
			for _, l := range r.Links {
				bw = append(bw, l.BW)
			}
		}
	}
	tests := []struct {
		name              string
		xs                []float64
		mean, tol, lo, hi float64
	}{
		{"substrate links", links, 490, 40, 400, 600},
		{"substrate cpu", subCPU, 75, 1.5, 50, 100},
		{"substrate bw", subBW, 75, 1, 50, 100},
		{"request size", sizes, 6, 0.1, 2, 10},
		{"node cpu", cpu, 10, 0.2, 0, 20},
		{"link bw", bw, 25, 0.5, 0, 50},
		{"lifetime", life, 500, 15, 0, math.Inf(1)},
		{"arrival gap", gaps, 6.25, 0.1, 0, math.Inf(1)},
		// G(n, 0.5) redrawn until connected: more than half the pairs (n = 2 always has its
		// one link; n = 3 has 2 or 3 of 3 links): the exact mean over n = 2..10 is about 0.61.
		{"request link share", vlinkShare, 0.61, 0.02, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mean, lo, hi := stats(tt.xs)
			if math.Abs(mean-tt.mean) > tt.tol {
				t.Errorf("mean %.3f, want %.3f ± %.3f", mean, tt.mean, tt.tol)
			}
			if lo < tt.lo || hi > tt.hi {
				t.Errorf("range [%g, %g] outside [%g, %g]", lo, hi, tt.lo, tt.hi)
			}
			if !math.IsInf(tt.hi, 1) && (lo != tt.lo || hi != tt.hi) && tt.name != "substrate links" && tt.name != "request link share" {
				t.Errorf("range [%g, %g] does not reach both ends [%g, %g]", lo, hi, tt.lo, tt.hi)
			}
		})
	}
	for _, g := range gaps {
		if g != math.Trunc(g) {
			t.Fatalf("gap %g is not an integer", g)
		}
	}
}

func TestTestbedShape(t *testing.T) {
	w := DefaultTestbed()
	for _, seed := range []uint64{1, 2, 3} {
		in := w.Generate(seed)
		if m := len(in.Sub.Nodes); m < 4 || m > 32 {
			t.Fatalf("%d machines", m)
		}
		for _, n := range in.Sub.Nodes {
			if gib := n.Mem / 1024; gib < 32 || gib > 512 || n.CPU < 8 || n.CPU > 64 || n.NIC < 10000 || n.NIC > 100000 {
				t.Fatalf("machine %+v", n)
			}
		}
		for _, r := range in.Requests {
			n := len(r.Nodes)
			if n < 10 || n > 500 {
				t.Fatalf("request of %d nodes", n)
			}
			// Barabási–Albert with 2 links per new node: 3 + 2(n-3) links, connected.
			if len(r.Links) != 3+2*(n-3) {
				t.Fatalf("%d nodes, %d links", n, len(r.Links))
			}
			edges := make([][2]int, len(r.Links))
			for i, l := range r.Links {
				edges[i] = [2]int{l.A, l.B}
			}
			if !connected(n, edges) {
				t.Fatal("request not connected")
			}
		}
	}
}
