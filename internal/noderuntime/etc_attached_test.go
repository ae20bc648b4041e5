package noderuntime

import "testing"

func TestReleaseAtLeast(t *testing.T) {
	for _, c := range []struct {
		release string
		want    bool
	}{
		{"6.1.0-56-amd64", false},
		{"6.14.9", false},
		{"6.15.0", true},
		{"6.18.44-fc-v782", true},
		{"7.0.1", true},
		{"5.19.0", false},
		{"garbage", false},
	} {
		if got := releaseAtLeast(c.release, 6, 15); got != c.want {
			t.Errorf("releaseAtLeast(%q, 6, 15) = %v, want %v", c.release, got, c.want)
		}
	}
}
