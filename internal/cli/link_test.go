package cli

import (
	"strings"
	"testing"

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
		{[]string{"delay=20ms"}, spec.Impairment{}, "delay and jitter are not applied"},
		{[]string{"colour=red"}, spec.Impairment{}, "set takes loss, duplicate and corrupt"},
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
