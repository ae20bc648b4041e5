package enginehelper

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/trellisnet/trellis/internal/dataplane"
	"github.com/trellisnet/trellis/internal/spec"
)

// MaglevSize is the size of a flow dispatch's lookup table: a prime, so that every FE's
// permutation visits every slot, and large next to the engines, so that their shares are even
// (within 1/MaglevSize·N of each other).
const MaglevSize = 4093

// Table returns the classifier's configuration for a node's dispatch over its engines:
// round-robin takes the engines in turn; weighted is a smooth weighted round-robin (each
// engine's turns spread over the cycle, not in bursts); flow is a Maglev table (Eisenbud et
// al., NSDI 2016), so that adding or removing an engine moves few flows.
func Table(d spec.Dispatch, engines []spec.Engine) (dataplane.EnginesConfig, error) {
	n := len(engines)
	if n == 0 || n > dataplane.MaxEngineFEs {
		return dataplane.EnginesConfig{}, fmt.Errorf("%w: %d engines", ErrConfig, n)
	}
	c := dataplane.EnginesConfig{FEs: n}
	switch d.Mode {
	case spec.DispatchRoundRobin:
		for i := range n {
			c.Slots = append(c.Slots, uint32(i))
		}
	case spec.DispatchWeighted:
		w := make([]int, n)
		for i, e := range engines {
			w[i] = e.Weight
		}
		c.Slots = SmoothWeighted(w)
	case spec.DispatchFlow:
		c.Mode = dataplane.EngineModeFlow
		c.Slots = Maglev(n, MaglevSize)
		c.Fields = fieldBits(d.Fields)
		c.Offset, c.Length = uint32(d.Offset), uint32(d.Length)
	default:
		return c, fmt.Errorf("%w: dispatch %q", ErrConfig, d.Mode)
	}
	return c, nil
}

func fieldBits(fields []string) uint32 {
	bits := map[string]uint32{spec.FieldSrc: dataplane.EngineFieldSrc, spec.FieldDst: dataplane.EngineFieldDst,
		spec.FieldProto: dataplane.EngineFieldProto, spec.FieldSport: dataplane.EngineFieldSport, spec.FieldDport: dataplane.EngineFieldDport}
	var out uint32
	for _, f := range fields {
		out |= bits[f]
	}
	return out
}

// SmoothWeighted returns one cycle of smooth weighted round-robin over weights (reduced by their
// greatest common divisor): engine i appears weights[i] times, spread over the cycle.
func SmoothWeighted(weights []int) []uint32 {
	g := 0
	for _, w := range weights {
		g = gcd(g, w)
	}
	total := 0
	for i := range weights {
		weights[i] /= max(g, 1)
		total += weights[i]
	}
	cur := make([]int, len(weights))
	out := make([]uint32, 0, total)
	for range total {
		best := 0
		for i, w := range weights {
			cur[i] += w
			if cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= total
		out = append(out, uint32(best))
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Maglev fills a lookup table of size m (a prime) for n backends by Maglev's permutations.
// Backend i is named by its index, so backend i keeps most of its slots when backends after
// it come or go.
func Maglev(n, m int) []uint32 {
	offset, skip, next := make([]int, n), make([]int, n), make([]int, n)
	for i := range n {
		sum := sha256.Sum256(fmt.Appendf(nil, "trellis-fe/%d", i))
		offset[i] = int(binary.BigEndian.Uint64(sum[0:8]) % uint64(m))
		skip[i] = int(binary.BigEndian.Uint64(sum[8:16])%uint64(m-1)) + 1
	}
	table := make([]int, m)
	for i := range table {
		table[i] = -1
	}
	for filled := 0; filled < m; {
		for i := 0; i < n && filled < m; i++ {
			c := (offset[i] + next[i]*skip[i]) % m
			for table[c] >= 0 {
				next[i]++
				c = (offset[i] + next[i]*skip[i]) % m
			}
			table[c] = i
			next[i]++
			filled++
		}
	}
	out := make([]uint32, m)
	for i, b := range table {
		out[i] = uint32(b)
	}
	return out
}
