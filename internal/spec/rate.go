package spec

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// rateNumRE is the number part of a rate: plain decimal digits with an optional fraction. It keeps
// out what strconv.ParseFloat would also take (NaN, Inf, hex, exponents, underscores, signs).
var rateNumRE = regexp.MustCompile(`^([0-9]+(\.[0-9]*)?|\.[0-9]+)$`)

// rateUnits are tc's units: bits per second, or bytes per second for the *bps forms.
var rateUnits = []struct {
	suffix string
	mult   float64
}{
	{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1},
	{"tbps", 8e12}, {"gbps", 8e9}, {"mbps", 8e6}, {"kbps", 8e3}, {"bps", 8},
}

// ParseRate reads a rate written the way tc writes it (10mbit, 1gbit, 500kbit, 2mbps) and
// returns bits per second.
func ParseRate(s string) (uint64, error) {
	low := strings.ToLower(strings.TrimSpace(s))
	for _, u := range rateUnits {
		num, ok := strings.CutSuffix(low, u.suffix)
		if !ok {
			continue
		}
		if !rateNumRE.MatchString(num) {
			break
		}
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || v <= 0 {
			break
		}
		// Round, not truncate: 4.1*1e6 is 4099999.999... in floating point.
		bits := math.Round(v * u.mult)
		if bits < 8 || bits > 1e13 {
			return 0, fmt.Errorf("rate %q is out of range", s)
		}
		return uint64(bits), nil
	}
	return 0, fmt.Errorf("%q is not a rate", s)
}

// FormatRate writes bits per second the way tc would.
func FormatRate(bps uint64) string {
	for _, u := range rateUnits[:5] {
		if bps >= uint64(u.mult) && bps%uint64(u.mult) == 0 {
			return fmt.Sprintf("%d%s", bps/uint64(u.mult), u.suffix)
		}
	}
	return fmt.Sprintf("%dbit", bps)
}
