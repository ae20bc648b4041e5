//go:build !integration

// Not in the integration build: the contract test (contract_integration_test.go) runs every
// registered kind on the kernel, and this one only exists in a test.

package kinds_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/trellisnet/trellis/internal/kinds"
	"github.com/trellisnet/trellis/internal/plan"
	"github.com/trellisnet/trellis/internal/spec"
	"github.com/vishvananda/netlink"
	"gopkg.in/yaml.v3"
)

// A node kind with settings of its own, as a newcomer adds one (docs/architecture.md, "Adding
// a kind"): in the product it would be internal/kinds/example/example.go, everything below but
// the tests, and one import line in internal/kinds/all. Nothing else names it: spec reads its
// `example:` key with its parser, checks the node with its Check, keeps its settings in the
// node (plan.Digest included), and the plan hands the node to its Start.

const exampleName = "example"

// exampleSettings are the kind's settings, under a node's `example:` key.
type exampleSettings struct {
	Greeting string `json:",omitempty"`
	Repeat   int    `json:",omitempty"` // 1 when not given
}

func init() {
	kinds.RegisterNode(exampleName, &exampleKind{started: map[string]*exampleSettings{}}, spec.NodeKind{
		Check: checkExample,
		Settings: &spec.NodeSettings{Key: "example", What: "example settings", Parse: parseExample,
			New: func() spec.Settings { return &exampleSettings{} }},
	})
	// A kind without settings, to refuse `example:` on.
	kinds.RegisterNode("plain", &exampleKind{}, spec.NodeKind{})
}

// parseExample reads `example: {greeting: TEXT, repeat: N}`.
func parseExample(r *spec.Reader, v *yaml.Node) spec.Settings {
	f, ok := r.Fields(v, r.Field, "greeting", "repeat")
	if !ok {
		return nil
	}
	s := &exampleSettings{Repeat: 1}
	for k, val := range f {
		r.Line("example."+k, val.Line)
	}
	if v := f["greeting"]; v != nil {
		s.Greeting, _ = r.Str(v, r.Field+".greeting")
	}
	if v := f["repeat"]; v != nil {
		text, _ := r.Str(v, r.Field+".repeat")
		if n, err := strconv.Atoi(text); err != nil || n < 1 || n > 9 {
			r.Fail(v, r.Field+".repeat", fmt.Sprintf("%q is not a whole number from 1 to 9", text), "give how many times to greet, e.g. 2")
		} else {
			s.Repeat = n
		}
	}
	return s
}

// checkExample refuses an empty greeting (after parsing: what needs the whole node or network).
func checkExample(n *spec.Network, nd *spec.Node) []*spec.Error {
	if s, ok := nd.KindSettings().(*exampleSettings); ok && s.Greeting == "" {
		return []*spec.Error{n.NodeError(nd, "example.greeting", "a node of kind example greets", "write e.g. `greeting: hello`")}
	}
	return nil
}

// exampleKind runs no process: Start notes the settings it was given.
type exampleKind struct {
	mu      sync.Mutex
	started map[string]*exampleSettings
}

func (k *exampleKind) Start(_ context.Context, _ *kinds.Env, n *plan.Node) (kinds.Instance, error) {
	s, _ := n.KindSettings().(*exampleSettings)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.started[n.Name] = s
	return kinds.Instance{Kind: exampleName, Name: n.Name, Digest: n.Digest}, nil
}

func (k *exampleKind) Running(*kinds.Env) (map[string]kinds.Instance, error)  { return nil, nil }
func (k *exampleKind) Stop(context.Context, *kinds.Env, kinds.Instance) error { return nil }
func (k *exampleKind) Port(context.Context, *kinds.Env, kinds.Instance, *plan.Node, plan.Port, int) (netlink.Link, error) {
	return nil, fmt.Errorf("the example kind has no ports")
}
func (k *exampleKind) Configure(context.Context, *kinds.Env, kinds.Instance, *plan.Node, plan.Port, []string, bool) error {
	return nil
}
func (k *exampleKind) Exec(context.Context, *kinds.Env, kinds.Instance, *plan.Node) error { return nil }

// TestExampleKind: the example kind's settings parse from YAML, are checked, and reach its Start
// through the plan, with no line of trellis outside this file naming the kind.
func TestExampleKind(t *testing.T) {
	const doc = "name: t\nnodes:\n  a:\n    kind: example\n    example: {greeting: hello, repeat: 3}\n  b:\n    kind: example\n"
	n, err := spec.Parse("topo.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(n, "scope", "", &plan.Names{})
	if err != nil {
		t.Fatal(err)
	}
	k, err := kinds.NodeKind(exampleName)
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range p.Nodes {
		if _, err := k.Start(context.Background(), &kinds.Env{Plan: p}, nd); err != nil {
			t.Fatal(err)
		}
	}
	ek := k.(*exampleKind)
	if s := ek.started["a"]; s == nil || *s != (exampleSettings{"hello", 3}) {
		t.Errorf("a started with %+v, want greeting hello, repeat 3", s)
	}
	if s, ok := ek.started["b"]; !ok || s != nil {
		t.Errorf("b started with %+v, want no settings", s)
	}
	// The settings are the node's: changing them changes its digest (it starts again).
	n2, err := spec.Parse("topo.yaml", []byte(strings.Replace(doc, "repeat: 3", "repeat: 4", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if plan.Digest(n.Nodes[0]) == plan.Digest(n2.Nodes[0]) || plan.Digest(n.Nodes[1]) != plan.Digest(n2.Nodes[1]) {
		t.Errorf("digests a %s -> %s, b %s -> %s: want a's changed with its settings, b's not",
			plan.Digest(n.Nodes[0]), plan.Digest(n2.Nodes[0]), plan.Digest(n.Nodes[1]), plan.Digest(n2.Nodes[1]))
	}
}

// TestExampleKindErrors: what is wrong with the kind's settings is reported at its line and
// field, with the problems of the rest of the file, and `example:` on another kind is refused.
func TestExampleKindErrors(t *testing.T) {
	const doc = "name: t\nnodes:\n  a:\n    kind: example\n    example:\n      greeting: \"\"\n      repeat: many\n      colour: red\n  b:\n    kind: plain\n    example: {greeting: hi}\n  c:\n    kind: example\n    example: 5\n"
	_, err := spec.Parse("topo.yaml", []byte(doc))
	want := strings.Join([]string{
		"topo.yaml:6: nodes.a.example.greeting: a node of kind example greets; write e.g. `greeting: hello`",
		"topo.yaml:7: nodes.a.example.repeat: \"many\" is not a whole number from 1 to 9; give how many times to greet, e.g. 2",
		"topo.yaml:8: nodes.a.example.colour: unknown key; the keys allowed here are [greeting repeat]",
		"topo.yaml:11: nodes.b.example: a plain node has no example settings; remove `example:`, or make the node `kind: example`",
		"topo.yaml:14: nodes.c.example: expected a mapping of keys to values; see the topology file reference in README.md",
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("errors\n%v\nwant\n%s", err, want)
	}
}
