package result

import (
	"math"
	"testing"
)

func TestStat(t *testing.T) {
	s := StatOf([]float64{3, 1, math.NaN(), 2, 10})
	if s.Median != 2.5 || s.Min != 1 || s.Max != 10 || len(s.Values) != 4 {
		t.Errorf("statOf = %+v", s)
	}
	if s := StatOf(nil); s.Median != 0 || len(s.Values) != 0 {
		t.Errorf("StatOf(nil) = %+v", s)
	}
	r := RatioStat([]float64{2, 3}, []float64{1, 0})
	if r.Median != 2 || len(r.Values) != 1 {
		t.Errorf("ratioStat = %+v", r)
	}
}
