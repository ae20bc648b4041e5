package placement

import "fmt"

// Slice is a share of one forwarding engine (a core) given to a virtual network.
type Slice struct {
	Engine int
	Power  float64
}

// SliceAlloc is Algorithm 1 of the PdP paper (Liao et al., "PdP: parallelizing data plane in
// virtual network substrate", VISA 2009): a network that needs need = k·c + r processing power,
// with c the power of one engine, gets k whole idle engines and one slice of r on the engine
// whose free power is closest above r (best fit), so that it is split over as few engines as
// possible. free is the free power of each engine and is updated. The paper's test is
// "available > r"; an engine with exactly r free is taken here too (a perfect fit).
func SliceAlloc(free []float64, c, need float64) ([]Slice, error) {
	if c <= 0 || need < 0 {
		return nil, fmt.Errorf("%w: engine power %g and need %g", ErrInvalid, c, need)
	}
	k := int(need / c)
	r := need - float64(k)*c
	if r < eps {
		r = 0
	}
	var out []Slice
	idle := 0
	for i, f := range free {
		if f >= c-eps && len(out) < k {
			out = append(out, Slice{i, c})
		}
		if f >= c-eps {
			idle++
		}
	}
	if len(out) < k {
		return nil, fmt.Errorf("%w: need %d idle engines, have %d", ErrNoCapacity, k, idle)
	}
	whole := map[int]bool{}
	for _, s := range out {
		whole[s.Engine] = true
	}
	if r > 0 {
		best := -1
		for i, f := range free {
			if whole[i] || f+eps < r {
				continue
			}
			if best < 0 || f-r < free[best]-r {
				best = i
			}
		}
		if best < 0 {
			return nil, fmt.Errorf("%w: no engine has %g free", ErrNoCapacity, r)
		}
		out = append(out, Slice{best, r})
	}
	for _, s := range out {
		free[s.Engine] -= s.Power
	}
	return out, nil
}
