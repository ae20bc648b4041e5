package spec

import (
	"reflect"
	"testing"
	"time"
)

// validDocs are files that must parse; the fuzz test starts from them too.
var validDocs = []string{impairDoc, `name: flow
nodes: {a: {kind: container}, b: {}}
links:
  - endpoints: [b:eth1, a:eth1]
    state: down
    from: {a:eth1: {loss: 5%, delay: 50ms}}
`, `name: spread
hosts:
  m1: {address: 198.18.0.1}
  m2: {address: 198.18.0.2, mtu: 9000}
tunnel: vxlan
nodes:
  a: {host: m1}
  b: {host: m2}
  c:
links:
  - endpoints: [a:eth1, b:eth1, c:eth1]
    rate: 10mbit
    jitter: 1ms
    delay: 2ms
    distribution: pareto
`}

const impairDoc = `name: imp
nodes:
  a:
  b:
  c:
links:
  - endpoints: [b:eth1, a:eth1]
    loss: 10% 25%
    duplicate: 1%
    corrupt: 0.1%
    delay: 20ms
    jitter: 5ms
    from:
      a:eth1:
        loss: 5%
        delay: 50ms
        distribution: normal
  - name: quiet
    endpoints: [a:eth2, c:eth1]
    state: down
    from:
      c:eth1: {delay: 1s, jitter: 10ms}
  - endpoints: [c:eth2, a:eth3, b:eth2]
    connector: bridge
    state: up
`

func TestParseImpairments(t *testing.T) {
	n, err := Parse("topo.yaml", []byte(impairDoc))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckInvariants(n); err != nil {
		t.Fatal(err)
	}
	ab, quiet, lan := n.Links[0], n.Links[1], n.Links[2]
	link := Impairment{Loss: 10, LossCorrelation: 25, Duplicate: 1, Corrupt: 0.1, Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Distribution: "uniform"}
	fromA := Impairment{Loss: 5, Duplicate: 1, Corrupt: 0.1, Delay: 50 * time.Millisecond, Jitter: 5 * time.Millisecond, Distribution: "normal"}
	fromC := Impairment{Delay: time.Second, Jitter: 10 * time.Millisecond, Distribution: "uniform"}
	for _, tc := range []struct {
		name string
		l    *Link
		e    Endpoint
		want Impairment
	}{
		{"link level, from b", ab, Endpoint{Node: "b", Ifname: "eth1"}, link},
		{"merged, from a (loss replaces the correlation too)", ab, Endpoint{Node: "a", Ifname: "eth1", Line: 99}, fromA},
		{"none, from a on quiet", quiet, Endpoint{Node: "a", Ifname: "eth2"}, Impairment{}},
		{"from c on quiet", quiet, Endpoint{Node: "c", Ifname: "eth1"}, fromC},
		{"lan", lan, Endpoint{Node: "b", Ifname: "eth2"}, Impairment{}},
	} {
		if got := tc.l.ImpairmentFrom(tc.e); got != tc.want {
			t.Errorf("%s: ImpairmentFrom = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if want := map[string]Impairment{"a:eth1": fromA}; !reflect.DeepEqual(ab.From, want) {
		t.Errorf("From = %+v, want %+v", ab.From, want)
	}
	for _, tc := range []struct {
		l           *Link
		name, state string
	}{{ab, "a:eth1--b:eth1", StateUp}, {quiet, "quiet", StateDown}, {lan, "a:eth3--b:eth2--c:eth2", StateUp}} {
		if tc.l.Name != tc.name || tc.l.State != tc.state {
			t.Errorf("link %q state %q, want %q %q", tc.l.Name, tc.l.State, tc.name, tc.state)
		}
	}
	if !ab.Impair.Delays() || ab.Impair.IsZero() || !quiet.Impair.IsZero() || quiet.Impair.Delays() {
		t.Errorf("IsZero/Delays wrong: %+v %+v", ab.Impair, quiet.Impair)
	}
	if lossOnly := (Impairment{Loss: 1}); lossOnly.Delays() || lossOnly.IsZero() {
		t.Errorf("loss alone: Delays %v IsZero %v", lossOnly.Delays(), lossOnly.IsZero())
	}
	lines := map[string]int{"loss": 8, "duplicate": 9, "jitter": 12, "from": 14, "from.a:eth1": 14, "from.a:eth1.delay": 16,
		"from.a:eth1.distribution": 17, "mtu": 7, "state": 7, "name": 7, "endpoints": 7}
	for field, want := range lines {
		if got := ab.FieldLine(field); got != want {
			t.Errorf("FieldLine(%q) = %d, want %d", field, got, want)
		}
	}
	if got := quiet.FieldLine("state"); got != 20 {
		t.Errorf("quiet FieldLine(state) = %d, want 20", got)
	}
	if nd := n.Node("a"); nd.Kind != DefaultNodeKind || nd.FieldLine("kind") != 3 {
		t.Errorf("node a kind %q line %d, want %q at its own line 3", nd.Kind, nd.FieldLine("kind"), DefaultNodeKind)
	}
}

// A link's derived name depends on its endpoints only, not on their order or the link's place.
func TestDerivedLinkNameIsStable(t *testing.T) {
	docA := `name: t
nodes: {a: {}, b: {}, c: {}}
links:
  - endpoints: [a:eth1, b:eth1]
  - endpoints: [c:eth1, b:eth2]
`
	docB := `name: t
nodes: {c: {}, b: {}, a: {}}
links:
  - endpoints: [b:eth2, c:eth1]
  - endpoints: [c:eth9, a:eth9]
  - endpoints: [b:eth1, a:eth1]
`
	names := func(doc string) map[string]bool {
		n, err := Parse("topo.yaml", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, l := range n.Links {
			out[l.Name] = true
		}
		return out
	}
	a, b := names(docA), names(docB)
	for name := range a {
		if !b[name] {
			t.Errorf("link %q of the first file is not in the reordered one (%v)", name, b)
		}
	}
	if !a["a:eth1--b:eth1"] || !a["b:eth2--c:eth1"] || !b["a:eth9--c:eth9"] {
		t.Errorf("derived names %v and %v", a, b)
	}
}

var impairErrorCases = []struct {
	name string
	doc  string // the links: section of a file with nodes a, b, c
	want []string
}{
	{"loss forms", `  - endpoints: [a:eth1, b:eth1]
    loss: 10
    duplicate: 1% 2%
    corrupt: -1%
  - endpoints: [a:eth2, b:eth2]
    loss: 10% 25% 3%
  - endpoints: [a:eth3, b:eth3]
    loss: nan%
`, []string{
		"topo.yaml:5: links[0].loss: \"10\" is not a percentage; write a percentage, optionally followed by a correlation percentage: `loss: 10%` or `loss: 10% 25%`",
		"topo.yaml:6: links[0].duplicate: \"1% 2%\" is not a percentage; write a percentage from 0% to 100%, e.g. `duplicate: 1%`",
		"topo.yaml:7: links[0].corrupt: \"-1%\" is not a percentage; write a percentage from 0% to 100%, e.g. `corrupt: 0.1%`",
		"topo.yaml:9: links[1].loss: \"10% 25% 3%\" is not a loss; write a percentage, optionally followed by a correlation percentage: `loss: 10%` or `loss: 10% 25%`",
		"topo.yaml:11: links[2].loss: \"nan%\" is not a percentage; write a percentage, optionally followed by a correlation percentage: `loss: 10%` or `loss: 10% 25%`",
	}},
	{"durations", `  - endpoints: [a:eth1, b:eth1]
    delay: 20
    jitter: -5ms
  - endpoints: [a:eth2, b:eth2]
    delay: 2m
    distribution: gauss
`, []string{
		"topo.yaml:5: links[0].delay: \"20\" is not a duration from 0 to 1m0s; write a duration from 0 to 1m0s with a unit, e.g. `delay: 20ms` or `delay: 1.5s`",
		"topo.yaml:6: links[0].jitter: \"-5ms\" is not a duration from 0 to 1m0s; write a duration from 0 to 1m0s with a unit, e.g. `jitter: 5ms`",
		"topo.yaml:8: links[1].delay: \"2m\" is not a duration from 0 to 1m0s; write a duration from 0 to 1m0s with a unit, e.g. `delay: 20ms` or `delay: 1.5s`",
		`topo.yaml:9: links[1].distribution: unknown distribution "gauss"; use one of: uniform, normal, pareto, paretonormal`,
	}},
	{"jitter needs delay, distribution needs jitter", `  - endpoints: [a:eth1, b:eth1]
    jitter: 5ms
  - endpoints: [a:eth2, b:eth2]
    delay: 5ms
    distribution: normal
`, []string{
		"topo.yaml:5: links[0].jitter: jitter without a delay; add a `delay:` (the jitter varies it), or remove the jitter",
		"topo.yaml:8: links[1].distribution: a distribution without jitter; add a `jitter:` (the distribution shapes it), or remove the distribution",
	}},
	{"per direction", `  - endpoints: [a:eth1, b:eth1]
    delay: 10ms
    jitter: 1ms
    distribution: normal
    from:
      a:eth1: {delay: 0s}
      b:eth1: {jitter: 0s}
      c:eth1: {loss: 1%}
  - endpoints: [a:eth2, b:eth2]
    from:
      a:eth2: {jitter: 1ms, lose: 1%}
      a:eth2: {}
      b:eth2: [loss]
  - endpoints: [a:eth3, b:eth3]
    from: {a:eth3: {loss: 5%, delay: 50ms}}
    state: UP
`, []string{
		"topo.yaml:9: links[0].from.a:eth1.delay: a zero delay here leaves the link's jitter without a delay; give a delay above 0, or add `jitter: 0s` here too",
		"topo.yaml:10: links[0].from.b:eth1.jitter: a zero jitter here leaves the link's distribution without jitter; give a jitter above 0, or remove the link's distribution",
		"topo.yaml:11: links[0].from.c:eth1: not an endpoint of this link; use one of: a:eth1, b:eth1",
		"topo.yaml:14: links[1].from.a:eth2.lose: unknown key; the keys allowed here are [loss duplicate corrupt delay jitter distribution]",
		"topo.yaml:14: links[1].from.a:eth2.jitter: jitter without a delay; add a `delay:` (the jitter varies it), or remove the jitter",
		"topo.yaml:15: links[1].from.a:eth2: endpoint given twice; give each endpoint's impairments under one key",
		"topo.yaml:16: links[1].from.b:eth2: expected a mapping of keys to values; see the topology file reference in README.md",
		`topo.yaml:19: links[2].state: "UP" is not a link state; write up or down`,
	}},
}

func TestParseImpairmentErrors(t *testing.T) {
	for _, tc := range impairErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, "name: t\nnodes: {a: {}, b: {}, c: {}}\nlinks:\n"+tc.doc, tc.want)
		})
	}
}

func TestValidDocs(t *testing.T) {
	for i, doc := range validDocs {
		n, err := Parse("topo.yaml", []byte(doc))
		if err != nil {
			t.Fatalf("validDocs[%d]: %v", i, err)
		}
		if err := CheckInvariants(n); err != nil {
			t.Errorf("validDocs[%d]: %v", i, err)
		}
	}
	// The flow form of `from:` takes NODE:IF keys.
	n, _ := Parse("topo.yaml", []byte(validDocs[1]))
	want := Impairment{Loss: 5, Delay: 50 * time.Millisecond}
	if l := n.Links[0]; l.ImpairmentFrom(l.Endpoints[1]) != want || !l.ImpairmentFrom(l.Endpoints[0]).IsZero() || l.State != StateDown || l.Name != "a:eth1--b:eth1" {
		t.Errorf("link %q state %s from a %+v from b %+v", l.Name, l.State, l.ImpairmentFrom(l.Endpoints[1]), l.ImpairmentFrom(l.Endpoints[0]))
	}
}
