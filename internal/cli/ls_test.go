package cli

import (
	"testing"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// ls counts the nodes that are not running, and those running only in part.
func TestNotRunning(t *testing.T) {
	nodes := []*plan.Node{{Node: &spec.Node{Name: "a"}}, {Node: &spec.Node{Name: "b"}}, {Node: &spec.Node{Name: "c"}}}
	cases := []struct {
		running map[string]kinds.Instance
		want    string
	}{
		{map[string]kinds.Instance{"a": {}, "b": {}, "c": {}}, ""},
		{map[string]kinds.Instance{"a": {}}, " (2 not running)"},
		{map[string]kinds.Instance{"a": {}, "b": {Digest: kinds.PartGone}, "c": {}}, " (1 in part)"},
		{map[string]kinds.Instance{"b": {Digest: kinds.PartGone}}, " (2 not running, 1 in part)"},
	}
	for _, c := range cases {
		if got := notRunning(nodes, c.running); got != c.want {
			t.Errorf("notRunning(%v) = %q, want %q", c.running, got, c.want)
		}
	}
}
