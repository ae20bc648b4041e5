package placement

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
// fewest hops first, ignoring free bandwidth. The paths and their order, ties included, are
// those of networkx's shortest_simple_paths(G, a, b) without weights (Yen's algorithm with a
// bidirectional breadth-first search), which Virne takes the first k of: G's neighbours are in
// the order of the substrate's links. Results are cached per ordered pair.
func (st *State) KShortest(a, b, k int) [][]int {
	key := [2]int{a, b}
	if p, ok := st.paths[key]; ok { // every caller asks for the same k
		return p[:min(k, len(p))]
	}
	nodePaths := st.simplePaths(a, b, k)
	p := make([][]int, len(nodePaths))
	for i, np := range nodePaths {
		p[i] = st.linksOf(np)
	}
	st.paths[key] = p
	return p
}

// linksOf turns a node path into the links joining its consecutive nodes.
func (st *State) linksOf(nodes []int) []int {
	links := make([]int, 0, len(nodes)-1)
	for i := 1; i < len(nodes); i++ {
		for _, e := range st.Adj[nodes[i-1]] {
			if e.Node == nodes[i] {
				links = append(links, e.Link)
				break
			}
		}
	}
	return links
}

// pathBuffer is networkx's PathBuffer: candidates by cost, then by order of arrival; a path
// already waiting is not added again.
type pathBuffer struct {
	cost, num []int
	paths     [][]int
	next      int
}

func (pb *pathBuffer) push(cost int, path []int) {
	for _, p := range pb.paths {
		if slices.Equal(p, path) {
			return
		}
	}
	pb.cost, pb.num, pb.paths = append(pb.cost, cost), append(pb.num, pb.next), append(pb.paths, path)
	pb.next++
}

func (pb *pathBuffer) pop() []int {
	best := 0
	for i := range pb.paths {
		if pb.cost[i] < pb.cost[best] || (pb.cost[i] == pb.cost[best] && pb.num[i] < pb.num[best]) {
			best = i
		}
	}
	p := pb.paths[best]
	pb.cost = slices.Delete(pb.cost, best, best+1)
	pb.num = slices.Delete(pb.num, best, best+1)
	pb.paths = slices.Delete(pb.paths, best, best+1)
	return p
}

// simplePaths is networkx's shortest_simple_paths (unweighted), stopped after k paths, as node
// lists.
func (st *State) simplePaths(a, b, k int) [][]int {
	var found [][]int
	var buf pathBuffer
	var prev []int
	for len(found) < k {
		if prev == nil {
			if p := st.biBFS(a, b, nil, nil); p != nil {
				buf.push(len(p), p)
			}
		} else {
			nodeOff := make([]bool, len(st.Adj))
			edgeOff := map[[2]int]bool{}
			for i := 1; i < len(prev); i++ {
				root := prev[:i]
				for _, p := range found {
					if len(p) > i && slices.Equal(p[:i], root) {
						edgeOff[[2]int{p[i-1], p[i]}] = true
					}
				}
				if spur := st.biBFS(root[i-1], b, nodeOff, edgeOff); spur != nil {
					buf.push(i+len(spur), append(slices.Clone(root[:i-1]), spur...))
				}
				nodeOff[root[i-1]] = true
			}
		}
		if len(buf.paths) == 0 {
			break
		}
		prev = buf.pop()
		found = append(found, prev)
	}
	return found
}

// biBFS is networkx's _bidirectional_shortest_path: breadth-first from both ends, always
// growing the smaller fringe (the forward one on a tie), stopping at the first node seen from
// both sides. nodeOff and edgeOff (either orientation) are left out. It returns the node path,
// or nil if there is none.
func (st *State) biBFS(src, dst int, nodeOff []bool, edgeOff map[[2]int]bool) []int {
	if nodeOff != nil && (nodeOff[src] || nodeOff[dst]) {
		return nil
	}
	if src == dst {
		return []int{src}
	}
	n := len(st.Adj)
	pred, succ := make([]int, n), make([]int, n)
	inPred, inSucc := make([]bool, n), make([]bool, n)
	pred[src], inPred[src], succ[dst], inSucc[dst] = -1, true, -1, true
	usable := func(v, w int) bool {
		return (nodeOff == nil || !nodeOff[w]) && !edgeOff[[2]int{v, w}] && !edgeOff[[2]int{w, v}]
	}
	forward, reverse := []int{src}, []int{dst}
	meet := -1
	for len(forward) > 0 && len(reverse) > 0 && meet < 0 {
		if len(forward) <= len(reverse) {
			level := forward
			forward = nil
		fwd:
			for _, v := range level {
				for _, e := range st.Adj[v] {
					w := e.Node
					if !usable(v, w) {
						continue
					}
					if !inPred[w] {
						forward, pred[w], inPred[w] = append(forward, w), v, true
					}
					if inSucc[w] {
						meet = w
						break fwd
					}
				}
			}
		} else {
			level := reverse
			reverse = nil
		rev:
			for _, v := range level {
				for _, e := range st.Adj[v] {
					w := e.Node
					if !usable(v, w) {
						continue
					}
					if !inSucc[w] {
						reverse, succ[w], inSucc[w] = append(reverse, w), v, true
					}
					if inPred[w] {
						meet = w
						break rev
					}
				}
			}
		}
	}
	if meet < 0 {
		return nil
	}
	var path []int
	for w := meet; w >= 0; w = succ[w] {
		path = append(path, w)
	}
	for w := pred[meet]; w >= 0; w = pred[w] {
		path = append([]int{w}, path...)
	}
	return path

}
