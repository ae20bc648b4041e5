package spec

import (
	"reflect"
	"strings"
	"testing"
)

// engineDoc is a network of two nodes and one link; node r1 gets the lines given.
func engineDoc(r1 string) string {
	return "name: t\nnodes:\n  r1:\n" + r1 + "  r2:\nlinks:\n  - endpoints: [r1:eth1, r2:eth1]\n"
}

func TestParseEngines(t *testing.T) {
	all := FlowFields
	tests := []struct {
		name     string
		r1       string
		engines  []Engine
		dispatch *Dispatch
	}{
		{"none", "", nil, nil},
		{"count, flow by default", "    engines: 3\n",
			[]Engine{{Weight: 1, Line: 4}, {Weight: 1, Line: 4}, {Weight: 1, Line: 4}},
			&Dispatch{Mode: DispatchFlow, Fields: all, Line: 4}},
		{"round-robin", "    engines: 2\n    dispatch: round-robin\n",
			[]Engine{{Weight: 1, Line: 4}, {Weight: 1, Line: 4}}, &Dispatch{Mode: DispatchRoundRobin, Line: 5}},
		{"list with cpus and weights", "    engines:\n      - {cpus: \"0-2,5\", weight: 3}\n      - cpus: 1\n      -\n    dispatch: weighted\n",
			[]Engine{{CPUs: []int{0, 1, 2, 5}, Weight: 3, Line: 5}, {CPUs: []int{1}, Weight: 1, Line: 6}, {Weight: 1, Line: 7}},
			&Dispatch{Mode: DispatchWeighted, Line: 8}},
		{"shares of cores", "    engines:\n      - cpus: 0.5\n      - {cpus: 1.0, weight: 2}\n    dispatch: weighted\n",
			[]Engine{{Share: 0.5, Weight: 1, Line: 5}, {Share: 1, Weight: 2, Line: 6}}, &Dispatch{Mode: DispatchWeighted, Line: 7}},
		{"flow on addresses", "    engines: 1\n    dispatch: {fields: [dst, src]}\n",
			[]Engine{{Weight: 1, Line: 4}}, &Dispatch{Mode: DispatchFlow, Fields: []string{"dst", "src"}, Line: 5}},
		{"flow with non-IP bytes", "    engines: 2\n    dispatch: {mode: flow, offset: 14, length: 4}\n",
			[]Engine{{Weight: 1, Line: 4}, {Weight: 1, Line: 4}}, &Dispatch{Mode: DispatchFlow, Fields: all, Offset: 14, Length: 4, Line: 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := Parse("topo.yaml", []byte(engineDoc(tc.r1)))
			if err != nil {
				t.Fatal(err)
			}
			nd := n.Node("r1")
			got := nd.Engines
			for i := range got { // unexported bookkeeping is not compared
				got[i].weightGiven, got[i].weightLine, got[i].hostLine = false, 0, 0
			}
			if !reflect.DeepEqual(got, tc.engines) {
				t.Errorf("engines = %+v, want %+v", got, tc.engines)
			}
			if !reflect.DeepEqual(nd.Dispatch, tc.dispatch) {
				t.Errorf("dispatch = %+v, want %+v", nd.Dispatch, tc.dispatch)
			}
			if err := CheckInvariants(n); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestParseEngineErrors(t *testing.T) {
	tests := []struct {
		name, r1, want string
	}{
		{"zero engines", "    engines: 0\n",
			`topo.yaml:4: nodes.r1.engines: "0" is not a number of engines; give a count from 1 to 64, or a list of engines with cpus, weight and host`},
		{"too many", "    engines: 65\n",
			`topo.yaml:4: nodes.r1.engines: "65" is not a number of engines; give a count from 1 to 64, or a list of engines with cpus, weight and host`},
		{"empty list", "    engines: []\n",
			"topo.yaml:4: nodes.r1.engines: expected a number of engines or a list of 1 to 64 engines; write e.g. `engines: 3`, or `engines: [{cpus: 0, weight: 2}, {cpus: 1}]`"},
		{"unknown engine key", "    engines:\n      - {cpu: 1}\n",
			`topo.yaml:5: nodes.r1.engines[0].cpu: unknown key; the keys allowed here are [cpus weight host]`},
		{"share of no core", "    engines:\n      - {cpus: 0.0}\n",
			`topo.yaml:5: nodes.r1.engines[0].cpus: "0.0" is not a share of cores; give a share with a decimal point, above 0 and at most 64 (e.g. 0.5 or 1.0), or CPU numbers without one`},
		{"share too large", "    engines:\n      - {cpus: 64.5}\n",
			`topo.yaml:5: nodes.r1.engines[0].cpus: "64.5" is not a share of cores; give a share with a decimal point, above 0 and at most 64 (e.g. 0.5 or 1.0), or CPU numbers without one`},
		{"share not a number", "    engines:\n      - {cpus: 0.5.1}\n",
			`topo.yaml:5: nodes.r1.engines[0].cpus: "0.5.1" is not a share of cores; give a share with a decimal point, above 0 and at most 64 (e.g. 0.5 or 1.0), or CPU numbers without one`},
		{"bad cpus", "    engines:\n      - {cpus: 3-1}\n",
			`topo.yaml:5: nodes.r1.engines[0].cpus: "3-1" is not a list of CPUs; give CPU numbers (0 to 4095) and ranges as the kernel writes them, e.g. 2 or "0-3,6"`},
		{"bad weight", "    engines:\n      - {weight: 0}\n    dispatch: weighted\n",
			`topo.yaml:5: nodes.r1.engines[0].weight: "0" is not a weight; give a whole number from 1 to 100`},
		{"weight without weighted", "    engines:\n      - {weight: 2}\n      - {}\n    dispatch: round-robin\n",
			"topo.yaml:5: nodes.r1.engines[0].weight: a weight counts only with `dispatch: weighted`; set `dispatch: weighted`, or remove the weight"},
		{"host without hosts", "    engines:\n      - {}\n      - host: m2\n",
			`topo.yaml:6: nodes.r1.engines[1].host: no host named "m2"; name a machine declared under hosts`},
		{"dispatch without engines", "    dispatch: flow\n",
			"topo.yaml:4: nodes.r1.dispatch: dispatch without engines; add `engines: N`, or remove dispatch"},
		{"unknown dispatch", "    engines: 2\n    dispatch: random\n",
			`topo.yaml:5: nodes.r1.dispatch: unknown dispatch "random"; use one of: round-robin, weighted, flow`},
		{"unknown flow field", "    engines: 2\n    dispatch: {fields: [src, ttl]}\n",
			`topo.yaml:5: nodes.r1.dispatch.fields[1]: unknown flow field "ttl"; use some of: src, dst, proto, sport, dport`},
		{"flow field twice", "    engines: 2\n    dispatch: {fields: [src, src]}\n",
			`topo.yaml:5: nodes.r1.dispatch.fields[1]: flow field "src" given twice; keep only one`},
		{"no flow fields", "    engines: 2\n    dispatch: {fields: []}\n",
			`topo.yaml:5: nodes.r1.dispatch.fields: no fields given; name at least one of: src, dst, proto, sport, dport, or remove fields for all of them`},
		{"fields with round-robin", "    engines: 2\n    dispatch:\n      mode: round-robin\n      fields: [src]\n",
			"topo.yaml:7: nodes.r1.dispatch.fields: flow fields with dispatch round-robin; remove fields, or use `mode: flow`"},
		{"offset without length", "    engines: 2\n    dispatch: {offset: 12}\n",
			"topo.yaml:5: nodes.r1.dispatch.offset: offset without length; add `length:` (1 to 16 bytes), or remove offset"},
		{"length too long", "    engines: 2\n    dispatch: {offset: 0, length: 17}\n",
			`topo.yaml:5: nodes.r1.dispatch.length: "17" is not a byte length; give offset from 0 and length from 1 to 16, the key within the frame's first 128 bytes`},
		{"bytes beyond 128", "    engines: 2\n    dispatch: {offset: 120, length: 16}\n",
			"topo.yaml:5: nodes.r1.dispatch.length: bytes 120 to 136 lie beyond the frame's first 128; keep offset + length at most 128"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, engineDoc(tc.r1), strings.Split(tc.want, "\n"))
		})
	}
}

// An engine may run on another machine than its node (the cluster router); it must name a
// machine under hosts, and a cluster's file may not choose one.
func TestEngineOnAnotherHost(t *testing.T) {
	doc := `name: t
hosts:
  m1: {address: 198.18.0.1}
  m2: {address: 198.18.0.2}
nodes:
  r1:
    host: m1
    engines:
      - host: m1
      - host: m2
  r2: {host: m1}
links:
  - endpoints: [r1:eth1, r2:eth1]
`
	n, err := Parse("topo.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Node("r1").Engines[1].Host; got != "m2" {
		t.Fatalf("engine 1's host = %q, want m2", got)
	}
	bad := strings.Replace(doc, "host: m2", "host: m3", 1)
	checkErrors(t, bad, []string{`topo.yaml:10: nodes.r1.engines[1].host: no host named "m3"; name a machine declared under hosts`})
}

// A link of a node with engines may have a rate: the classifier caps the node's frames and its
// engines' together.
func TestEnginesAcceptRate(t *testing.T) {
	doc := "name: t\nnodes:\n  r1:\n    engines: 2\n  r2:\nlinks:\n  - endpoints: [r1:eth1, r2:eth1]\n    rate: 10mbit\n"
	n, err := Parse("topo.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if n.Links[0].Rate != 10_000_000 {
		t.Errorf("rate %d, want 10 000 000", n.Links[0].Rate)
	}
}

func TestParseCPUs(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		ok   bool
	}{
		{"3", []int{3}, true},
		{"0-3,6", []int{0, 1, 2, 3, 6}, true},
		{"6,0-1,1", []int{0, 1, 6}, true},
		{" 2 - 3 ", nil, false},
		{"", nil, false},
		{"-1", nil, false},
		{"4096", nil, false},
		{"a", nil, false},
	}
	for _, tc := range tests {
		got, err := ParseCPUs(tc.in)
		if (err == nil) != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseCPUs(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
