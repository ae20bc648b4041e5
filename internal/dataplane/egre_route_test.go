package dataplane

import (
	"testing"
	"time"
)

func TestEncapRouteTTL(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want time.Duration
	}{
		{Config{}, EncapRouteTTL},
		{Config{PerFrameRoute: true}, 0},
		{Config{PortHook: "tcx"}, EncapRouteTTL},
	} {
		if got := tc.c.encapRouteTTL(); got != tc.want {
			t.Errorf("%+v: ttl %v, want %v", tc.c, got, tc.want)
		}
	}
}
