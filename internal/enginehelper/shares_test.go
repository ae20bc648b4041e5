package enginehelper

import (
	"errors"
	"reflect"
	"testing"

	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
)

// planOf is a plan with nodes of the given engines.
func planOf(nodes map[string][]spec.Engine) *plan.Plan {
	p := &plan.Plan{}
	for name, es := range nodes {
		p.Nodes = append(p.Nodes, &plan.Node{Node: &spec.Node{Name: name, Engines: es}})
	}
	return p
}

// Engines asking for shares get cores by best fit, after engines with their own cores.
func TestShares(t *testing.T) {
	share := func(s float64) spec.Engine { return spec.Engine{Share: s, Weight: 1} }
	cases := []struct {
		name  string
		nodes map[string][]spec.Engine
		cores []int
		want  map[string][][]int
		err   error
	}{
		{"halves pack onto one core", map[string][]spec.Engine{"r": {share(0.5), share(0.5)}}, []int{0, 1},
			map[string][][]int{"r": {{0}, {0}}}, nil},
		{"a whole core each", map[string][]spec.Engine{"r": {share(1), share(1)}}, []int{0, 1},
			map[string][][]int{"r": {{0}, {1}}}, nil},
		{"one and a half: an idle core and a slice of another", map[string][]spec.Engine{"r": {share(1.5)}}, []int{0, 1, 2},
			map[string][][]int{"r": {{0, 1}}}, nil},
		// r's 0.7 takes core 0; s's 0.3 fits core 0's 0.3 exactly (best fit), its 0.5 goes to core 1.
		{"best fit across nodes, in name order", map[string][]spec.Engine{"s": {share(0.3), share(0.5)}, "r": {share(0.7)}}, []int{0, 1},
			map[string][][]int{"r": {{0}}, "s": {{0}, {1}}}, nil},
		{"engines with their own cores are served first", map[string][]spec.Engine{
			"a": {{CPUs: []int{0}, Weight: 1}}, "b": {share(1)}}, []int{0, 1},
			map[string][][]int{"b": {{1}}}, nil},
		{"a core list shares its power", map[string][]spec.Engine{
			"a": {{CPUs: []int{0, 1}, Weight: 1}}, "b": {share(0.5)}}, []int{0, 1},
			map[string][][]int{"b": {{0}}}, nil},
		{"the machine's own core numbers", map[string][]spec.Engine{"r": {share(1), share(0.25)}}, []int{2, 5},
			map[string][][]int{"r": {{2}, {5}}}, nil},
		{"engines on other machines take nothing here", map[string][]spec.Engine{
			"r": {{Share: 2, Weight: 1, Host: "m2"}, share(1)}}, []int{0},
			map[string][][]int{"r": {nil, {0}}}, nil},
		{"too much", map[string][]spec.Engine{"r": {share(1), share(1.5)}}, []int{0, 1}, nil, ErrConfig},
		{"no shares", map[string][]spec.Engine{"r": {{Weight: 1}}}, []int{0}, map[string][][]int{}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Shares(planOf(c.nodes), c.cores)
			if !errors.Is(err, c.err) {
				t.Fatalf("error %v, want %v", err, c.err)
			}
			if err == nil && !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

// A node's configuration carries the cores its shares were given.
func TestConfigShares(t *testing.T) {
	c := configOf(t, "name: e\nnodes:\n  a:\n  r:\n    engines: [{cpus: 0.5}, {cpus: 0.25}]\nlinks:\n  - endpoints: [a:eth1, r:eth1]\n")
	if len(c.Engines) != 2 || len(c.Engines[0].CPUs) != 1 || !reflect.DeepEqual(c.Engines[0].CPUs, c.Engines[1].CPUs) || c.Engines[0].Share != 0.5 {
		t.Fatalf("engines %+v: want both on one core (best fit), shares kept", c.Engines)
	}
}
