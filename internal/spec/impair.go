package spec

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Impairment is what a link does to the frames one endpoint sends, netem style. Percentages
// run from 0 to 100.
type Impairment struct {
	Loss, LossCorrelation, Duplicate, Corrupt float64 // percent
	Delay, Jitter                             time.Duration
	Distribution                              string // of the jitter: one of Distributions; set iff Jitter is
}

// IsZero says whether the impairment leaves frames alone.
func (im Impairment) IsZero() bool { return im == Impairment{} }

// Delays says whether the impairment holds frames back (delay or jitter): netem does it, or
// trellis's delay line where the kernel has no netem (internal/delay).
func (im Impairment) Delays() bool { return im.Delay > 0 || im.Jitter > 0 }

// Distributions are the jitter distributions a link may name, as netem names them.
var Distributions = []string{"uniform", "normal", "pareto", "paretonormal"}

// DefaultDistribution is the jitter's distribution unless the file names one (netem's own).
const DefaultDistribution = "uniform"

// MaxDelay bounds a link's delay and jitter.
const MaxDelay = time.Minute

// impairKeys are the keys of an impairment, at link level and under `from:`.
var impairKeys = []string{"loss", "duplicate", "corrupt", "delay", "jitter", "distribution"}

// impairFix says how to write each impairment key.
var impairFix = map[string]string{
	"loss":         "write a percentage, optionally followed by a correlation percentage: `loss: 10%` or `loss: 10% 25%`",
	"duplicate":    "write a percentage from 0% to 100%, e.g. `duplicate: 1%`",
	"corrupt":      "write a percentage from 0% to 100%, e.g. `corrupt: 0.1%`",
	"delay":        fmt.Sprintf("write a duration from 0 to %v with a unit, e.g. `delay: 20ms` or `delay: 1.5s`", MaxDelay),
	"jitter":       fmt.Sprintf("write a duration from 0 to %v with a unit, e.g. `jitter: 5ms`", MaxDelay),
	"distribution": "use one of: " + strings.Join(Distributions, ", "),
}

// setImpair sets one impairment key from its text; the error message says what is wrong.
func setImpair(im *Impairment, key, text string) error {
	var err error
	switch key {
	case "loss":
		f := strings.Fields(text)
		if len(f) == 0 || len(f) > 2 {
			return fmt.Errorf("%q is not a loss", text)
		}
		im.LossCorrelation = 0
		if im.Loss, err = parsePercent(f[0]); err == nil && len(f) == 2 {
			im.LossCorrelation, err = parsePercent(f[1])
		}
	case "duplicate":
		im.Duplicate, err = parsePercent(text)
	case "corrupt":
		im.Corrupt, err = parsePercent(text)
	case "delay":
		im.Delay, err = parseDelay(text)
	case "jitter":
		im.Jitter, err = parseDelay(text)
	case "distribution":
		if !contains(Distributions, text) {
			return fmt.Errorf("unknown distribution %q", text)
		}
		im.Distribution = text
	}
	return err
}

// parsePercent reads "10%" or "0.5%": a plain decimal number from 0 to 100 and a percent sign.
func parsePercent(s string) (float64, error) {
	num, ok := strings.CutSuffix(s, "%")
	if !ok || !rateNumRE.MatchString(num) {
		return 0, fmt.Errorf("%q is not a percentage", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v > 100 {
		return 0, fmt.Errorf("%q is not a percentage from 0%% to 100%%", s)
	}
	return v, nil
}

// parseDelay reads a duration with a unit ("20ms", "1.5s", "0") from 0 to MaxDelay.
func parseDelay(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > MaxDelay || strings.ContainsAny(s, "+-") {
		return 0, fmt.Errorf("%q is not a duration from 0 to %v", s, MaxDelay)
	}
	return d, nil
}

// checkImpair returns what is wrong with an impairment as a whole: the key to blame and why.
func checkImpair(im Impairment) (key, msg string) {
	switch {
	case im.Jitter > 0 && im.Delay == 0:
		return "jitter", "jitter without a delay"
	case im.Distribution != "" && im.Jitter == 0:
		return "distribution", "a distribution without jitter"
	}
	return "", ""
}

// impairFixes says how to fix what checkImpair found.
var impairFixes = map[string]string{
	"jitter":       "add a `delay:` (the jitter varies it), or remove the jitter",
	"distribution": "add a `jitter:` (the distribution shapes it), or remove the distribution",
}

// Check completes an impairment set key by key (Set): a jitter without a distribution gets
// the default one. The error says what is wrong as a whole (a jitter without a delay) and how
// to fix it.
func (im *Impairment) Check() error {
	*im = withDistribution(*im)
	if key, msg := checkImpair(*im); key != "" {
		return fmt.Errorf("%s: %s; %s", key, msg, impairFixes[key])
	}
	return nil
}

// Set sets key (loss, duplicate, corrupt, delay, jitter or distribution) of im from its text as
// a topology file writes it ("5%", "10% 25%" for a loss with correlation, "20ms"), for the
// CLI's and API's live changes; the error says what is wrong and how to write it.
func (im *Impairment) Set(key, text string) error {
	fix, ok := impairFix[key]
	if !ok {
		return fmt.Errorf("unknown impairment %q: use one of %s", key, strings.Join(impairKeys, ", "))
	}
	if err := setImpair(im, key, text); err != nil {
		return fmt.Errorf("%s: %w; %s", key, err, fix)
	}
	return nil
}
