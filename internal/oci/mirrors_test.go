package oci

import (
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

// TestCandidates: a Docker Hub image is looked for at the store's mirrors first, in order; an
// image of another registry only there.
func TestCandidates(t *testing.T) {
	for _, c := range []struct {
		ref     string
		mirrors []string
		want    []string
	}{
		{"alpine:3", nil, []string{"index.docker.io/library/alpine:3"}},
		{"alpine:3", []string{"m1.example:5000", "m2.example"}, []string{"m1.example:5000/library/alpine:3", "m2.example/library/alpine:3", "index.docker.io/library/alpine:3"}},
		{"quay.io/frr/frr:9", []string{"m1.example:5000"}, []string{"quay.io/frr/frr:9"}},
	} {
		r, err := name.ParseReference(c.ref)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, cand := range candidates(r, c.mirrors) {
			got = append(got, cand.Name())
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("candidates(%s, %q) = %q, want %q", c.ref, c.mirrors, got, c.want)
		}
	}
}
