package embedsim

import (
	"math"
	"slices"
	"testing"
)

// The expected values were printed by CPython 3.11 (random) and numpy 2.4 (np.random, legacy
// RandomState) for the same seeds and calls.
func TestVirneStreams(t *testing.T) {
	tests := []struct {
		name string
		got  func() []float64
		want []float64
	}{
		{"python seed 0 random()", func() []float64 {
			py := newPyRandom(0)
			return []float64{py.Float64(), py.Float64()}
		}, []float64{0.8444218515250481, 0.7579544029403025}},
		{"python seed 1111 random()", func() []float64 {
			return []float64{newPyRandom(1111).Float64()}
		}, []float64{0.21760077176688164}},
		{"numpy seed 0 randint, exponential, poisson", func() []float64 {
			np := newNumpyRandom(0)
			var xs []float64
			for range 5 {
				xs = append(xs, float64(np.randint(50, 100)))
			}
			xs = append(xs, np.exponential(500), np.exponential(500))
			for range 5 {
				xs = append(xs, float64(np.poisson(6.25)))
			}
			return xs
		}, []float64{94, 97, 50, 53, 53, 939.4820320986759, 488.5032137127078, 3, 9, 10, 4, 7}},
		{"numpy seed 9999 randint", func() []float64 {
			np := newNumpyRandom(9999)
			var xs []float64
			for range 5 {
				xs = append(xs, float64(np.randint(0, 50)))
			}
			for range 5 {
				xs = append(xs, float64(np.randint(2, 10)))
			}
			return xs
		}, []float64{22, 49, 47, 45, 28, 7, 8, 10, 2, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.got()
			if !slices.EqualFunc(got, tt.want, func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Abs(b) }) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}
