package substrate

import (
	"reflect"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

func TestProgramChanges(t *testing.T) {
	node := func(name, src string) *plan.Node {
		nd := &plan.Node{Node: &spec.Node{Name: name}}
		if src != "" {
			nd.Dataplane = &spec.Dataplane{Program: name + ".c", Source: []byte(src)}
		}
		return nd
	}
	mk := func(nodes ...*plan.Node) *plan.Plan { return &plan.Plan{Nodes: nodes} }
	tests := []struct {
		name     string
		old, new *plan.Plan
		want     []string
	}{
		{"same", mk(node("s1", "a")), mk(node("s1", "a")), nil},
		{"changed", mk(node("s1", "a"), node("s2", "b")), mk(node("s1", "a"), node("s2", "c")), []string{"s2"}},
		{"added to a node", mk(node("s1", "")), mk(node("s1", "a")), nil}, // the node restarts (plan.Digest)
		{"no old plan", nil, mk(node("s1", "a")), nil},
	}
	for _, tc := range tests {
		var got []string
		for _, c := range programChanges(tc.old, tc.new) {
			got = append(got, c.Name)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: changes on %v, want %v", tc.name, got, tc.want)
		}
	}
}
