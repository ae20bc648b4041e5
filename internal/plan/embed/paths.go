package embed

import "slices"

// bfs finds hop distances from src over links whose free bandwidth (minus extra, if given) is at
// least need; dist is -1 where unreachable. prev[v] is the link that reached v.
func (st *State) bfs(src int, need float64, extra []float64, dist, prev []int, queue []int) {
	for i := range dist {
		dist[i], prev[i] = -1, -1
	}
	dist[src] = 0
	queue = append(queue[:0], src)
	for h := 0; h < len(queue); h++ {
		u := queue[h]
		for _, a := range st.Adj[u] {
			if dist[a.Node] >= 0 {
				continue
			}
			free := st.BW[a.Link]
			if extra != nil {
				free -= extra[a.Link]
			}
			if free+eps < need {
				continue
			}
			dist[a.Node], prev[a.Node] = dist[u]+1, a.Link
			queue = append(queue, a.Node)
		}
	}
}

// walkBack lists the links from src to dst that bfs recorded in prev.
func (st *State) walkBack(dst int, dist, prev []int) []int {
	path := make([]int, dist[dst])
	at := dst
	for i := len(path) - 1; i >= 0; i-- {
		k := prev[at]
		path[i] = k
		l := st.Sub.Links[k]
		if l.A == at {
			at = l.B
		} else {
			at = l.A
		}
	}
	return path
}

// KShortest returns up to k loop-free paths (as link lists) from a to b on the whole substrate,
// fewest hops first, ignoring free bandwidth (Yen's algorithm). Results are cached per pair.
func (st *State) KShortest(a, b, k int) [][]int {
	key := [2]int{a, b}
	if p, ok := st.paths[key]; ok { // every caller asks for the same k
		return p[:min(k, len(p))]
	}
	p := st.yen(a, b, k)
	st.paths[key] = p
	return p
}

// hopPath is a shortest path by hops avoiding blocked nodes and links, as nodes and links.
func (st *State) hopPath(a, b int, nodeOff map[int]bool, linkOff map[int]bool) ([]int, []int) {
	n := len(st.Adj)
	dist, prev := make([]int, n), make([]int, n)
	for i := range dist {
		dist[i] = -1
	}
	dist[a] = 0
	q := []int{a}
	for h := 0; h < len(q) && dist[b] < 0; h++ {
		u := q[h]
		for _, e := range st.Adj[u] {
			if dist[e.Node] >= 0 || nodeOff[e.Node] || linkOff[e.Link] {
				continue
			}
			dist[e.Node], prev[e.Node] = dist[u]+1, e.Link
			q = append(q, e.Node)
		}
	}
	if dist[b] < 0 {
		return nil, nil
	}
	links := st.walkBack(b, dist, prev)
	return st.nodesOf(a, links), links
}

// nodesOf lists the nodes a path of links visits, starting at a.
func (st *State) nodesOf(a int, links []int) []int {
	nodes := []int{a}
	for _, k := range links {
		l := st.Sub.Links[k]
		if l.A == a {
			a = l.B
		} else {
			a = l.A
		}
		nodes = append(nodes, a)
	}
	return nodes
}

func (st *State) yen(a, b, k int) [][]int {
	nodes, links := st.hopPath(a, b, nil, nil)
	if links == nil {
		return nil
	}
	type cand struct{ nodes, links []int }
	found := []cand{{nodes, links}}
	var pool []cand
	for len(found) < k {
		last := found[len(found)-1]
		for i := 0; i < len(last.links); i++ {
			spur := last.nodes[i]
			rootNodes, rootLinks := last.nodes[:i+1], last.links[:i]
			linkOff, nodeOff := map[int]bool{}, map[int]bool{}
			for _, f := range found {
				if len(f.links) > i && slices.Equal(f.links[:i], rootLinks) {
					linkOff[f.links[i]] = true
				}
			}
			for _, v := range rootNodes[:i] {
				nodeOff[v] = true
			}
			sn, sl := st.hopPath(spur, b, nodeOff, linkOff)
			if sl == nil {
				continue
			}
			c := cand{append(slices.Clone(rootNodes), sn[1:]...), append(slices.Clone(rootLinks), sl...)}
			dup := false
			for _, p := range append(pool, found...) {
				if slices.Equal(p.links, c.links) {
					dup = true
					break
				}
			}
			if !dup {
				pool = append(pool, c)
			}
		}
		if len(pool) == 0 {
			break
		}
		best := 0
		for i, c := range pool {
			if len(c.links) < len(pool[best].links) {
				best = i
			}
		}
		found = append(found, pool[best])
		pool = slices.Delete(pool, best, best+1)
	}
	out := make([][]int, len(found))
	for i, f := range found {
		out[i] = f.links
	}
	return out
}
