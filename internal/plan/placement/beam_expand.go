package placement

import (
	"slices"
	"sort"
)

type cand struct {
	node  int
	score float64
}

// expand places virtual node v in the best few ways from partial p.
func (b *Beam) expand(st *State, r *Request, p *partial, v int, root bool, sc *scratch) []*partial {
	var links []int // links of v to placed neighbours
	for j, l := range r.Links {
		if (l.A == v && p.nodes[l.B] >= 0) || (l.B == v && p.nodes[l.A] >= 0) {
			links = append(links, j)
		}
	}
	n := len(st.CPU)
	sc.ensure(len(links), n)
	for i, j := range links {
		l := r.Links[j]
		other := p.nodes[l.A]
		if l.A == v {
			other = p.nodes[l.B]
		}
		st.bfs(other, l.BW, p.used, sc.dist[i], sc.prev[i], sc.queue)
	}
	var cands []cand
	for m := 0; m < n; m++ {
		if p.taken[m] || st.CPU[m]+eps < r.Nodes[v].CPU || st.Mem[m]+eps < r.Nodes[v].Mem {
			continue
		}
		if r.Nodes[v].Pinned && r.Nodes[v].Pin != m {
			continue
		}
		score, ok := 0.0, true
		for i, j := range links {
			d := sc.dist[i][m]
			if d < 0 {
				ok = false
				break
			}
			score += r.Links[j].BW * float64(d)
		}
		if !ok {
			continue
		}
		// among equal hop costs, prefer the node with more free capacity around it
		score -= 1e-6 * st.around(m, p.used)
		cands = append(cands, cand{m, score})
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].score < cands[j].score })
	limit := b.Width
	if root {
		limit = b.Roots
	}
	var out []*partial
	for i, c := range cands {
		// bounded work: a crowded substrate makes most routings fail, so stop trying after
		// four times the candidates wanted
		if len(out) >= limit || i >= 4*limit {
			break
		}
		if q := route(st, r, p, v, c.node, links, sc); q != nil {
			out = append(out, q)
		}
	}
	return out
}

// around is a node's free CPU plus the free bandwidth of its links.
func (st *State) around(m int, used []float64) float64 {
	s := st.CPU[m]
	for _, a := range st.Adj[m] {
		s += st.BW[a.Link] - used[a.Link]
	}
	return s
}

// route places v on m and routes its links to placed neighbours one after the other, each on a
// fewest-hop path with the bandwidth left; nil if one cannot be routed.
func route(st *State, r *Request, p *partial, v, m int, links []int, sc *scratch) *partial {
	q := p.clone()
	q.nodes[v] = m
	q.taken[m] = true
	sc.ensure(len(links)+1, len(st.CPU))
	dist, prev := sc.dist[len(links)], sc.prev[len(links)]
	for _, j := range links {
		l := r.Links[j]
		other := q.nodes[l.A]
		if l.A == v {
			other = q.nodes[l.B]
		}
		st.bfs(m, l.BW, q.used, dist, prev, sc.queue)
		if dist[other] < 0 {
			return nil
		}
		path := st.walkBack(other, dist, prev) // from m to other
		if l.A != v {
			slices.Reverse(path)
		}
		for _, k := range path {
			q.used[k] += l.BW
		}
		q.paths[j] = path
		q.cost += l.BW * float64(len(path))
	}
	return q
}
