package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// line is a substrate path 0-1-2-...-(n-1) with the given capacities.
func line(cpu []float64, bw []float64) *Substrate {
	s := &Substrate{}
	for _, c := range cpu {
		s.Nodes = append(s.Nodes, Node{CPU: c})
	}
	for i, b := range bw {
		s.Links = append(s.Links, Link{A: i, B: i + 1, BW: b})
	}
	return s
}

func TestGRCRankVector(t *testing.T) {
	tests := []struct {
		name  string
		cap   []float64
		links []VLink
		want  []float64
	}{
		// No links: r = (1-d)c + d·0 iterated is (1-d)c.
		{"isolated", []float64{1, 3}, nil, []float64{0.15 * 0.25, 0.15 * 0.75}},
		// Symmetric pair: r stays c = (0.5, 0.5).
		{"pair", []float64{2, 2}, []VLink{{0, 1, 5}}, []float64{0.5, 0.5}},
		// Star 0-1, 0-2 with equal CPU: fixed point r0 = (1-d)/3 + d(r1+r2), r1 = r2 = (1-d)/3 + d·r0/2.
		{"star", []float64{1, 1, 1}, []VLink{{0, 1, 1}, {0, 2, 1}}, starFixedPoint(0.85)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := GRCRank(tt.cap, tt.links, 0.85, 1e-12)
			for i := range got {
				if d := got[i] - tt.want[i]; d > 1e-9 || d < -1e-9 {
					t.Fatalf("rank %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func starFixedPoint(d float64) []float64 {
	// r1 = a + d·r0/2, r0 = a + 2d·r1 with a = (1-d)/3 → r0 = a + 2d(a + d·r0/2) = a(1+2d) + d²r0.
	a := (1 - d) / 3
	r0 := a * (1 + 2*d) / (1 - d*d)
	r1 := a + d*r0/2
	return []float64{r0, r1, r1}
}

func TestGRCHandMade(t *testing.T) {
	tests := []struct {
		name      string
		sub       *Substrate
		req       Request
		wantNodes []int
		wantHops  []int
		wantErr   error
	}{{
		// Node 2 has the most CPU and the most bandwidth around it, then node 1; the heavier
		// virtual node (0) takes node 2, the other node 1; the link is one hop.
		name:      "ranked",
		sub:       line([]float64{50, 60, 100, 40}, []float64{50, 90, 80}),
		req:       Request{Nodes: []VNode{{CPU: 10}, {CPU: 5}}, Links: []VLink{{0, 1, 20}}},
		wantNodes: []int{2, 1}, wantHops: []int{1},
	}, {
		// Node 2 is too small for virtual node 0 (cpu 70): it goes to the next in rank order
		// that fits (node 1, cpu 80); virtual node 1 then takes node 2 though 0 is free too.
		name:      "skips a full node",
		sub:       line([]float64{75, 80, 100, 10}, []float64{60, 90, 80}),
		req:       Request{Nodes: []VNode{{CPU: 90}, {CPU: 5}}, Links: []VLink{{0, 1, 20}}},
		wantNodes: []int{2, 1}, wantHops: []int{1},
	}, {
		// Ring 0-1-2-3-0: only node 2 can hold virtual node 0 and only 3 then holds 1; the
		// direct link 2-3 lacks bandwidth, so GRC takes the second shortest path (3 hops).
		name: "second path",
		sub: &Substrate{Nodes: []Node{{CPU: 1}, {CPU: 1}, {CPU: 100}, {CPU: 40}},
			Links: []Link{{0, 1, 100}, {1, 2, 100}, {2, 3, 5}, {3, 0, 100}}},
		req:       Request{Nodes: []VNode{{CPU: 50}, {CPU: 5}}, Links: []VLink{{0, 1, 20}}},
		wantNodes: []int{2, 3}, wantHops: []int{3},
	}, {
		name:    "no cpu",
		sub:     line([]float64{5, 5}, []float64{100}),
		req:     Request{Nodes: []VNode{{CPU: 10}, {CPU: 5}}, Links: []VLink{{0, 1, 20}}},
		wantErr: ErrNoCapacity,
	}, {
		name:    "no bandwidth",
		sub:     line([]float64{50, 50}, []float64{10}),
		req:     Request{Nodes: []VNode{{CPU: 10}, {CPU: 5}}, Links: []VLink{{0, 1, 20}}},
		wantErr: ErrNoCapacity,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := NewState(VNE, tt.sub)
			if err != nil {
				t.Fatal(err)
			}
			e, err := NewGRC().Embed(st, &tt.req)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(e.Nodes, tt.wantNodes) {
				t.Fatalf("nodes %v, want %v", e.Nodes, tt.wantNodes)
			}
			for j, p := range e.Paths {
				if len(p) != tt.wantHops[j] {
					t.Fatalf("link %d: %d hops, want %d", j, len(p), tt.wantHops[j])
				}
			}
			if err := st.Apply(&tt.req, e); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestKShortest(t *testing.T) {
	// Ring of 5: between 0 and 2 there are exactly two simple paths, of 2 and 3 hops.
	s := &Substrate{Nodes: make([]Node, 5)}
	for i := 0; i < 5; i++ {
		s.Links = append(s.Links, Link{A: i, B: (i + 1) % 5, BW: 1})
	}
	st, _ := NewState(VNE, s)
	got := st.KShortest(0, 2, 10)
	if len(got) != 2 || len(got[0]) != 2 || len(got[1]) != 3 {
		t.Fatalf("paths %v", got)
	}
}

// TestKShortestOrderAsNetworkx checks that the paths and their order, ties included, are those of
// networkx's shortest_simple_paths, which Virne's GRC-Rank takes the first 10 of. The expected
// lists were printed by networkx 3.6 for a 3×3 grid whose links are added in the order below.
func TestKShortestOrderAsNetworkx(t *testing.T) {
	links := [][2]int{{0, 1}, {1, 2}, {3, 4}, {4, 5}, {6, 7}, {7, 8}, {0, 3}, {3, 6}, {1, 4}, {4, 7}, {2, 5}, {5, 8}}
	s := &Substrate{Nodes: make([]Node, 9)}
	for _, l := range links {
		s.Links = append(s.Links, Link{A: l[0], B: l[1], BW: 1})
	}
	tests := []struct {
		a, b int
		want [][]int
	}{
		{0, 8, [][]int{{0, 3, 6, 7, 8}, {0, 1, 2, 5, 8}, {0, 3, 4, 7, 8}, {0, 1, 4, 7, 8}, {0, 3, 4, 5, 8}, {0, 1, 4, 5, 8}, {0, 3, 6, 7, 4, 5, 8}, {0, 1, 2, 5, 4, 7, 8}, {0, 3, 4, 1, 2, 5, 8}, {0, 1, 4, 3, 6, 7, 8}}},
		{8, 0, [][]int{{8, 5, 2, 1, 0}, {8, 7, 6, 3, 0}, {8, 5, 4, 1, 0}, {8, 7, 4, 1, 0}, {8, 5, 4, 3, 0}, {8, 7, 4, 3, 0}, {8, 5, 2, 1, 4, 3, 0}, {8, 7, 6, 3, 4, 1, 0}, {8, 5, 4, 7, 6, 3, 0}, {8, 7, 4, 5, 2, 1, 0}}},
		{2, 6, [][]int{{2, 5, 8, 7, 6}, {2, 1, 0, 3, 6}, {2, 5, 4, 7, 6}, {2, 1, 4, 7, 6}, {2, 5, 4, 3, 6}, {2, 1, 4, 3, 6}, {2, 5, 8, 7, 4, 3, 6}, {2, 1, 0, 3, 4, 7, 6}, {2, 5, 4, 1, 0, 3, 6}, {2, 1, 4, 5, 8, 7, 6}}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d-%d", tt.a, tt.b), func(t *testing.T) {
			st, err := NewState(VNE, s)
			if err != nil {
				t.Fatal(err)
			}
			got := st.KShortest(tt.a, tt.b, 10)
			if len(got) != len(tt.want) {
				t.Fatalf("%d paths, want %d", len(got), len(tt.want))
			}
			for i, links := range got {
				if nodes := nodesOf(s, tt.a, links); !slices.Equal(nodes, tt.want[i]) {
					t.Fatalf("path %d: %v, want %v", i, nodes, tt.want[i])
				}
			}
		})
	}
}

// nodesOf lists the nodes a path of links visits from a.
func nodesOf(s *Substrate, a int, links []int) []int {
	nodes := []int{a}
	for _, k := range links {
		if l := s.Links[k]; l.A == a {
			a = l.B
		} else {
			a = l.A
		}
		nodes = append(nodes, a)
	}
	return nodes
}

// randomInstance is a random connected substrate and requests that stress it.
func randomInstance(rng *rand.Rand, placement bool) (*Substrate, []Request) {
	n := 4 + rng.IntN(12)
	s := &Substrate{}
	for i := 0; i < n; i++ {
		s.Nodes = append(s.Nodes, Node{CPU: float64(5 + rng.IntN(40)), Mem: float64(10 + rng.IntN(50)), NIC: float64(20 + rng.IntN(80))})
		if i > 0 {
			s.Links = append(s.Links, Link{A: rng.IntN(i), B: i, BW: float64(5 + rng.IntN(60))})
		}
	}
	for k := 0; k < n; k++ {
		a, b := rng.IntN(n), rng.IntN(n)
		if a != b {
			s.Links = append(s.Links, Link{A: a, B: b, BW: float64(5 + rng.IntN(60))})
		}
	}
	var reqs []Request
	for i := 0; i < 30; i++ {
		m := 2 + rng.IntN(min(n-1, 6))
		r := Request{ID: i}
		for j := 0; j < m; j++ {
			r.Nodes = append(r.Nodes, VNode{CPU: float64(rng.IntN(15)), Mem: float64(rng.IntN(20))})
			if j > 0 {
				r.Links = append(r.Links, VLink{A: rng.IntN(j), B: j, BW: float64(rng.IntN(30))})
			}
		}
		if placement && rng.IntN(4) == 0 {
			r.Nodes[0].Pinned, r.Nodes[0].Pin = true, rng.IntN(n)
		}
		reqs = append(reqs, r)
	}
	return s, reqs
}

// TestNeverOverCommit runs every algorithm on random instances, applying what it proposes and
// releasing at random, and checks that free capacity never goes below zero nor above capacity.
func TestNeverOverCommit(t *testing.T) {
	algs := []struct {
		alg       Algorithm
		placement bool
	}{{NewGRC(), false}, {NewBeam(), false}, {&Beam{Width: 2, Roots: 3, MinRC: 0.6}, false}, {Pack{}, true}, {Spread{}, true}}
	for _, a := range algs {
		t.Run(a.alg.Name(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 7))
			accepted := 0
			for inst := 0; inst < 60; inst++ {
				s, reqs := randomInstance(rng, a.placement)
				p := VNE
				if a.placement {
					p = Placement
				}
				st, err := NewState(p, s)
				if err != nil {
					t.Fatal(err)
				}
				var held []int
				emb := map[int]*Embedding{}
				for i := range reqs {
					e, err := a.alg.Embed(st, &reqs[i])
					if err != nil {
						if !errors.Is(err, ErrNoCapacity) && !errors.Is(err, ErrRejected) {
							t.Fatalf("request %d: %v", i, err)
						}
					} else {
						if err := st.Apply(&reqs[i], e); err != nil {
							t.Fatalf("instance %d request %d: proposed an over-commit: %v", inst, i, err)
						}
						accepted++
						held, emb[i] = append(held, i), e
					}
					if len(held) > 0 && rng.IntN(3) == 0 {
						k := rng.IntN(len(held))
						st.Release(&reqs[held[k]], emb[held[k]])
						held = slices.Delete(held, k, k+1)
					}
					checkBounds(t, st)
				}
			}
			if accepted == 0 {
				t.Fatal("accepted nothing: the instances test nothing")
			}
		})
	}
}

func checkBounds(t *testing.T, st *State) {
	t.Helper()
	for i, n := range st.Sub.Nodes {
		if st.CPU[i] < -eps || st.CPU[i] > n.CPU+eps || st.Mem[i] < -eps || st.NIC[i] < -eps {
			t.Fatalf("node %d free cpu %g mem %g nic %g", i, st.CPU[i], st.Mem[i], st.NIC[i])
		}
	}
	for k, l := range st.Sub.Links {
		if st.BW[k] < -eps || st.BW[k] > l.BW+eps {
			t.Fatalf("link %d free bw %g of %g", k, st.BW[k], l.BW)
		}
	}
}

func TestCheckRefuses(t *testing.T) {
	s := line([]float64{10, 10, 10}, []float64{10, 10})
	r := &Request{Nodes: []VNode{{CPU: 5}, {CPU: 5}}, Links: []VLink{{0, 1, 8}}}
	tests := []struct {
		name string
		e    Embedding
		want string
	}{
		{"same node", Embedding{Nodes: []int{1, 1}, Paths: [][]int{{0}}}, "two nodes"},
		{"broken path", Embedding{Nodes: []int{0, 2}, Paths: [][]int{{1}}}, "breaks"},
		{"wrong end", Embedding{Nodes: []int{0, 2}, Paths: [][]int{{0}}}, "ends at"},
		{"missing node", Embedding{Nodes: []int{0}}, "every node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := NewState(VNE, s)
			err := st.Apply(r, &tt.e)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
	st, _ := NewState(VNE, s)
	big := &Request{Nodes: []VNode{{CPU: 5}, {CPU: 5}}, Links: []VLink{{0, 1, 11}}}
	if err := st.Apply(big, &Embedding{Nodes: []int{0, 1}, Paths: [][]int{{0}}}); !errors.Is(err, ErrNoCapacity) {
		t.Fatalf("bandwidth over-commit: %v", err)
	}
}
