package plan_test

import (
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// A node's digest changes with each setting only a restart applies, and a setting left out
// leaves it as it was before the setting existed.
func TestDigest(t *testing.T) {
	base := func() *spec.Node { return &spec.Node{Name: "r1", Kind: "container"} }
	// The digest of a plain container node, as it was before `rootfs:` existed: networks that
	// were up keep their nodes running across an upgrade.
	const plain = "5a2b9060de1f"
	if got := plan.Digest(base()); got != plain {
		t.Errorf("digest of a plain node %s, want %s", got, plain)
	}
	cases := []struct {
		name string
		set  func(*spec.Node)
	}{
		{"rootfs", func(n *spec.Node) { n.Rootfs = "/srv/roots/a" }},
		{"another rootfs", func(n *spec.Node) { n.Rootfs = "/srv/roots/b" }},
		{"exec", func(n *spec.Node) { n.Exec = []string{"true"} }},
		{"pids", func(n *spec.Node) { n.Pids = 64 }},
	}
	seen := map[string]string{plain: "plain"}
	for _, c := range cases {
		n := base()
		c.set(n)
		d := plan.Digest(n)
		if other, dup := seen[d]; dup {
			t.Errorf("%s: digest %s, the same as %s's", c.name, d, other)
		}
		seen[d] = c.name
	}
}
