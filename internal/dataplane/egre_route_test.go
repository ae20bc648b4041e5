package dataplane

import (
	"testing"
	"time"
)

func TestEncapRouteTTL(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want time.Duration
	}{
		{"", EncapRouteTTL},
		{"per-frame", 0},
		{"template", EncapRouteTTL},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(EncapRouteEnv, tc.env)
			if got := encapRouteTTL(); got != tc.want {
				t.Fatalf("%s=%q: ttl %v, want %v", EncapRouteEnv, tc.env, got, tc.want)
			}
		})
	}
}
