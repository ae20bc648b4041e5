package embedsim

import "math"

// The WX100 generator draws from the same two random streams as Virne, so that a seed gives
// Virne's very instance: Python's random module (networkx draws the topologies from it) and
// numpy's legacy RandomState (Virne draws every attribute, size, lifetime and arrival gap from
// it). Both are the 32-bit Mersenne Twister MT19937; they differ in seeding.

const mtN, mtM = 624, 397

// mt19937 is the Mersenne Twister of Matsumoto and Nishimura (mt19937ar.c).
type mt19937 struct {
	mt  [mtN]uint32
	pos int
}

// initGenrand seeds from one 32-bit word (numpy's np.random.seed(int)).
func (m *mt19937) initGenrand(s uint32) {
	m.mt[0] = s
	for i := 1; i < mtN; i++ {
		m.mt[i] = 1812433253*(m.mt[i-1]^(m.mt[i-1]>>30)) + uint32(i)
	}
	m.pos = mtN
}

// initByArray seeds from a key (Python's random.seed(int): the int's 32-bit words, low first).
func (m *mt19937) initByArray(key []uint32) {
	m.initGenrand(19650218)
	i, j := 1, 0
	for k := max(mtN, len(key)); k > 0; k-- {
		m.mt[i] = (m.mt[i] ^ ((m.mt[i-1] ^ (m.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i, j = i+1, j+1
		if i >= mtN {
			m.mt[0], i = m.mt[mtN-1], 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k := mtN - 1; k > 0; k-- {
		m.mt[i] = (m.mt[i] ^ ((m.mt[i-1] ^ (m.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= mtN {
			m.mt[0], i = m.mt[mtN-1], 1
		}
	}
	m.mt[0] = 0x80000000
	m.pos = mtN
}

func (m *mt19937) next() uint32 {
	if m.pos >= mtN {
		for k := 0; k < mtN; k++ {
			y := m.mt[k]&0x80000000 | m.mt[(k+1)%mtN]&0x7fffffff
			v := m.mt[(k+mtM)%mtN] ^ y>>1
			if y&1 != 0 {
				v ^= 0x9908b0df
			}
			m.mt[k] = v
		}
		m.pos = 0
	}
	y := m.mt[m.pos]
	m.pos++
	y ^= y >> 11
	y ^= y << 7 & 0x9d2c5680
	y ^= y << 15 & 0xefc60000
	return y ^ y>>18
}

// Float64 is a uniform double in [0, 1) from 53 bits, as both Python and numpy make it.
func (m *mt19937) Float64() float64 {
	a, b := m.next()>>5, m.next()>>6
	return (float64(a)*67108864 + float64(b)) / 9007199254740992
}

// newPyRandom is Python's random.Random(seed) for a seed ≥ 0.
func newPyRandom(seed uint64) *mt19937 {
	key := []uint32{uint32(seed)}
	if hi := uint32(seed >> 32); hi != 0 {
		key = append(key, hi)
	}
	m := &mt19937{}
	m.initByArray(key)
	return m
}

// newNumpyRandom is numpy's legacy np.random.seed(seed); numpy takes seeds below 2³² only, so
// higher bits are dropped.
func newNumpyRandom(seed uint64) *mt19937 {
	m := &mt19937{}
	m.initGenrand(uint32(seed))
	return m
}

// randint is numpy's legacy randint(lo, hi+1): masked rejection sampling on 32-bit draws.
func (m *mt19937) randint(lo, hi int) int {
	rng := uint32(hi - lo)
	if rng == 0 {
		return lo
	}
	mask := rng
	for _, s := range []uint{1, 2, 4, 8, 16} {
		mask |= mask >> s
	}
	for {
		if v := m.next() & mask; v <= rng {
			return lo + int(v)
		}
	}
}

// exponential is numpy's legacy exponential(scale): −log(1 − U)·scale.
func (m *mt19937) exponential(scale float64) float64 {
	return -math.Log(1-m.Float64()) * scale
}

// poisson is numpy's legacy poisson(lam) for lam < 10 (multiplication method); numpy switches
// to another method (PTRS) at 10 and above, which this generator does not need.
func (m *mt19937) poisson(lam float64) int {
	enlam, x, prod := math.Exp(-lam), 0, 1.0
	for {
		prod *= m.Float64()
		if prod <= enlam {
			return x
		}
		x++
	}
}
