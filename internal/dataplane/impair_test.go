package dataplane

import (
	"math"
	"strings"
	"testing"
)

func TestImpairmentValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		im      Impairment
		wantErr string
	}{
		{"zero", Impairment{}, ""},
		{"all", Impairment{Loss: 10, LossCorrelation: 25, Duplicate: 5, Corrupt: 0.1}, ""},
		{"full", Impairment{Loss: 100, LossCorrelation: 99.9, Duplicate: 100, Corrupt: 100}, ""},
		{"negative loss", Impairment{Loss: -0.1}, "loss -0.1%"},
		{"loss above 100", Impairment{Loss: 100.01}, "loss 100.01%"},
		{"NaN duplicate", Impairment{Duplicate: math.NaN()}, "duplicate NaN%"},
		{"infinite corrupt", Impairment{Corrupt: math.Inf(1)}, "corrupt +Inf%"},
		{"correlation 100", Impairment{Loss: 1, LossCorrelation: 100}, "loss correlation 100%"},
		{"negative correlation", Impairment{Loss: 1, LossCorrelation: -5}, "loss correlation -5%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.im.validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("validate(%+v) = %v, want nil", tc.im, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("validate(%+v) = %v, want an error with %q", tc.im, err, tc.wantErr)
			}
		})
	}
}

func TestImpairmentThresholds(t *testing.T) {
	for _, tc := range []struct {
		percent float64
		want    uint64
	}{
		{0, 0},
		{100, 1 << 32},
		{50, 1 << 31},
		{10, 429496730},
		{0.000001, 43},
	} {
		if got := threshold(tc.percent); got != tc.want {
			t.Errorf("threshold(%v) = %d, want %d", tc.percent, got, tc.want)
		}
	}
	// Settings read back from the kernel are the ones written.
	for _, im := range []Impairment{
		{},
		{Loss: 10, LossCorrelation: 50, Duplicate: 5, Corrupt: 1},
		{Loss: 0.001, LossCorrelation: 99.5, Duplicate: 100, Corrupt: 33.333333},
	} {
		if got := impairmentOf(im.config()); got != im {
			t.Errorf("impairmentOf(config(%+v)) = %+v", im, got)
		}
	}
	if (Impairment{LossCorrelation: 30}).IsZero() != true || (Impairment{Corrupt: 1}).IsZero() {
		t.Error("IsZero: LossCorrelation alone must count as zero, Corrupt must not")
	}
}
