package placement

// improve lowers the cross-machine bandwidth of a placement by moving single nodes to the
// machine of their neighbours, or swapping them with a node there, as long as a pass finds a
// change that lowers it and every capacity still holds (at most passes passes).
func improve(st *State, r *Request, e *Embedding, nb [][]int, passes int) {
	cur := r.CrossBW(e)
	for pass := 0; pass < passes; pass++ {
		better := false
		for u := range r.Nodes {
			if r.Nodes[u].Pinned {
				continue
			}
			for _, m := range neighbourMachines(r, e, u, nb[u]) {
				if tryChange(st, r, e, nb, u, -1, m, &cur) {
					better = true
					break
				}
				done := false
				for v := range r.Nodes {
					if e.Nodes[v] == m && !r.Nodes[v].Pinned && tryChange(st, r, e, nb, u, v, m, &cur) {
						better, done = true, true
						break
					}
				}
				if done {
					break
				}
			}
		}
		if !better {
			return
		}
	}
}

// neighbourMachines lists the machines, other than u's, that hold a neighbour of u.
func neighbourMachines(r *Request, e *Embedding, u int, links []int) []int {
	var out []int
	seen := map[int]bool{e.Nodes[u]: true}
	for _, j := range links {
		l := r.Links[j]
		o := e.Nodes[l.A]
		if l.A == u {
			o = e.Nodes[l.B]
		}
		if !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	return out
}

// tryChange moves u to m (and v, if not -1, to u's machine); it keeps the change if the
// cross-machine bandwidth drops and the placement still fits, else undoes it.
func tryChange(st *State, r *Request, e *Embedding, nb [][]int, u, v, m int, cur *float64) bool {
	from := e.Nodes[u]
	before := localCross(r, e, nb, u, v)
	e.Nodes[u] = m
	if v >= 0 {
		e.Nodes[v] = from
	}
	if d := localCross(r, e, nb, u, v) - before; d < -eps && st.Check(r, e) == nil {
		*cur += d
		return true
	}
	e.Nodes[u] = from
	if v >= 0 {
		e.Nodes[v] = m
	}
	return false
}

// localCross is the cross-machine bandwidth of the links of u and v (each link once).
func localCross(r *Request, e *Embedding, nb [][]int, u, v int) float64 {
	s := 0.0
	for _, j := range nb[u] {
		if l := r.Links[j]; e.Nodes[l.A] != e.Nodes[l.B] {
			s += l.BW
		}
	}
	if v < 0 {
		return s
	}
	for _, j := range nb[v] {
		l := r.Links[j]
		if (l.A == u || l.B == u) || e.Nodes[l.A] == e.Nodes[l.B] {
			continue
		}
		s += l.BW
	}
	return s
}
