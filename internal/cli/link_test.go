package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/trellisnet/trellis/internal/spec"
)

func TestParseImpairment(t *testing.T) {
	cases := []struct {
		words []string
		want  spec.Impairment
		err   string
	}{
		{nil, spec.Impairment{}, ""},
		{[]string{"loss=5%"}, spec.Impairment{Loss: 5}, ""},
		{[]string{"loss=10% 25%", "duplicate=1%", "corrupt=0.1%"}, spec.Impairment{Loss: 10, LossCorrelation: 25, Duplicate: 1, Corrupt: 0.1}, ""},
		{[]string{"loss=5"}, spec.Impairment{}, "not a percentage"},
		{[]string{"loss=101%"}, spec.Impairment{}, "from 0% to 100%"},
		{[]string{"loss"}, spec.Impairment{}, "write KEY=VALUE"},
		{[]string{"delay=20ms"}, spec.Impairment{Delay: 20 * time.Millisecond}, ""},
		{[]string{"delay=20ms", "jitter=2ms"}, spec.Impairment{Delay: 20 * time.Millisecond, Jitter: 2 * time.Millisecond, Distribution: "uniform"}, ""},
		{[]string{"delay=1s", "jitter=5ms", "distribution=normal", "loss=1%"}, spec.Impairment{Delay: time.Second, Jitter: 5 * time.Millisecond, Distribution: "normal", Loss: 1}, ""},
		{[]string{"jitter=2ms"}, spec.Impairment{}, "jitter without a delay"},
		{[]string{"delay=20ms", "distribution=normal"}, spec.Impairment{}, "a distribution without jitter"},
		{[]string{"delay=2h"}, spec.Impairment{}, "not a duration from 0 to 1m0s"},
		{[]string{"colour=red"}, spec.Impairment{}, "unknown impairment"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.words, " "), func(t *testing.T) {
			got, err := parseImpairment(c.words)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}
