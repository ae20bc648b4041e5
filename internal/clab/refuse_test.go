package clab

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/spec"
)

// problem is one expected problem: its line, its field (the containerlab key) and words of
// its message.
type problem struct {
	line  int
	field string
	msg   string
}

// twoNodes is a lab of two linux nodes and a link; %s is put under node a (indented 6).
const twoNodes = `name: lab
topology:
  nodes:
    a:
      kind: linux
%s    b:
      kind: linux
  links:
    - endpoints: ["a:eth1", "b:eth1"]
`

func TestRefusals(t *testing.T) {
	type refusal struct {
		name  string
		doc   string
		files map[string]string
		want  []problem
	}
	tests := []refusal{
		{"not YAML", "name: x\ntopology: [\n", nil, []problem{{2, "(file)", "not valid YAML"}}},
		{"empty", "# nothing\n", nil, []problem{{0, "(file)", "the file is empty"}}},
		{"no name, no topology", "mgmt:\n  network: m\n", nil, []problem{{1, "mgmt", "no management network"}, {1, "name", "missing"}, {1, "topology", "missing"}}},
		{"unknown top key", "name: x\ntopology: {nodes: {a: {kind: linux}}}\nfoo: 1\n", nil, []problem{{3, "foo", "not a containerlab key"}}},
		{"unknown topology key", "name: x\ntopology:\n  nodes: {a: {kind: linux}}\n  hosts: {}\n", nil, []problem{{4, "topology.hosts", "not a containerlab topology key"}}},
		{"no nodes", "name: x\ntopology:\n  links: []\n", nil, []problem{{3, "topology.nodes", "missing"}}},
		{"vendor kind", "name: x\ntopology:\n  nodes:\n    srl:\n      kind: nokia_srlinux\n", nil,
			[]problem{{5, "topology.nodes.srl.kind", `cannot run kind "nokia_srlinux"`}}},
		{"no kind", "name: x\ntopology:\n  nodes:\n    a: {image: x}\n", nil, []problem{{4, "topology.nodes.a.kind", "missing"}}},
		{"unknown group", "name: x\ntopology:\n  nodes:\n    a: {kind: linux, group: nope}\n", nil,
			[]problem{{4, "topology.nodes.a.group", `no group "nope"`}}},
		{"unknown node key", fmt.Sprintf(twoNodes, "      imagee: x\n"), nil, []problem{{6, "topology.nodes.a.imagee", "not a containerlab node key"}}},
		{"key given twice", fmt.Sprintf(twoNodes, "      cmd: x\n      cmd: y\n"), nil, []problem{{7, "topology.nodes.a.cmd", "key given twice"}}},
		{"template", fmt.Sprintf(twoNodes, "      image: \"{{ .img }}\"\n"), nil, []problem{{6, "topology.nodes.a.image", "template"}}},
		{"environment variable", fmt.Sprintf(twoNodes, "      exec: [\"echo ${HOME}\"]\n"), nil, []problem{{6, "topology.nodes.a.exec[0]", "environment variable"}}},
		{"hostname", fmt.Sprintf(twoNodes, "      hostname: other\n"), nil, []problem{{6, "topology.nodes.a.hostname", `hostname is its name, "a"`}}},
		{"pull policy", fmt.Sprintf(twoNodes, "      image-pull-policy: Always\n"), nil, []problem{{6, "topology.nodes.a.image-pull-policy", "IfNotPresent"}}},
		{"bind rw", fmt.Sprintf(twoNodes, "      binds: [\"f:/etc/f:rw\"]\n"), map[string]string{"f": "x"}, []problem{{6, "topology.nodes.a.binds[0]", ":rw"}}},
		{"bind mode", fmt.Sprintf(twoNodes, "      binds: [\"f:/etc/f:z\"]\n"), map[string]string{"f": "x"}, []problem{{6, "topology.nodes.a.binds[0]", `bind mode "z"`}}},
		{"bind without destination", fmt.Sprintf(twoNodes, "      binds: [/data]\n"), nil, []problem{{6, "topology.nodes.a.binds[0]", "not a bind"}}},
		{"bind home", fmt.Sprintf(twoNodes, "      binds: [\"~/f:/etc/f\"]\n"), nil, []problem{{6, "topology.nodes.a.binds[0]", "not a host path"}}},
		{"bind lab dir", fmt.Sprintf(twoNodes, "      binds: [\"__clabNodeDir__/f:/etc/f\"]\n"), nil, []problem{{6, "topology.nodes.a.binds[0]", "directory containerlab makes"}}},
		{"bind relative destination", fmt.Sprintf(twoNodes, "      binds: [\"f:etc/f\"]\n"), map[string]string{"f": "x"}, []problem{{6, "topology.nodes.a.binds[0]", "not an absolute path"}}},
		{"bind missing", fmt.Sprintf(twoNodes, "      binds:\n        - gone:/etc/gone\n"), nil, []problem{{7, "topology.nodes.a.binds[0]", "cannot read"}}},
		{"link type host", "name: x\ntopology:\n  nodes: {a: {kind: linux}}\n  links:\n    - type: host\n      endpoint: {node: a, interface: eth1}\n      host-interface: h1\n", nil,
			[]problem{{5, "topology.links[0].type", "link type host"}}},
		{"unknown link type", "name: x\ntopology:\n  nodes: {a: {kind: linux}}\n  links:\n    - type: wire\n", nil,
			[]problem{{5, "topology.links[0].type", "not a containerlab link type"}}},
		{"brief host endpoint", "name: x\ntopology:\n  nodes: {a: {kind: linux}}\n  links:\n    - endpoints: [\"a:eth1\", \"host:veth0\"]\n", nil,
			[]problem{{5, "topology.links[0].endpoints[1]", "host's own network namespace"}}},
		{"brief mgmt-net endpoint", "name: x\ntopology:\n  nodes: {a: {kind: linux}}\n  links:\n    - endpoints: [\"a:eth1\", \"mgmt-net:a-eth1\"]\n", nil,
			[]problem{{5, "topology.links[0].endpoints[1]", "no management network"}}},
		{"link vars, endpoint mac, unknown keys", `name: x
topology:
  nodes: {a: {kind: linux}, b: {kind: linux}}
  links:
    - type: veth
      vars: {x: 1}
      ipv4: [10.0.0.1/24]
      endpoints:
        - {node: a, interface: eth1, mac: "02:00:00:00:00:01"}
        - {node: b, interface: eth1, color: red}
`, nil, []problem{{6, "topology.links[0].vars", "configuration templates"}, {7, "topology.links[0].ipv4", "not a key of a containerlab link"},
			{9, "topology.links[0].endpoints[0].mac", "derives an interface's MAC"}, {10, "topology.links[0].endpoints[1].color", "not a key of a containerlab endpoint"}}},
		{"three endpoints", "name: x\ntopology:\n  nodes: {a: {kind: linux}}\n  links:\n    - endpoints: [\"a:eth1\", \"a:eth2\", \"a:eth3\"]\n", nil,
			[]problem{{5, "topology.links[0].endpoints", "two endpoints"}}},
		{"endpoint without interface", "name: x\ntopology:\n  nodes: {a: {kind: linux}}\n  links:\n    - endpoints: [\"a\", \"a:eth2\"]\n", nil,
			[]problem{{5, "topology.links[0].endpoints[0]", "not NODE:INTERFACE"}}},
		{"too many brief addresses", "name: x\ntopology:\n  nodes: {a: {kind: linux}, b: {kind: linux}}\n  links:\n    - endpoints: [\"a:eth1\", \"b:eth1\"]\n      ipv4: [10.0.0.1/24, 10.0.0.2/24, 10.0.0.3/24]\n", nil,
			[]problem{{6, "topology.links[0].ipv4", "3 addresses for 2 endpoints"}}},
		{"bridges", `name: x
topology:
  nodes:
    a: {kind: linux}
    b: {kind: linux}
    br1: {kind: bridge, image: x}
    br2: {kind: bridge}
    br3: {kind: bridge}
  links:
    - endpoints: ["br1:e1", "br2:e1"]
    - endpoints: ["a:eth1", "br2:e2"]
      mtu: 1400
    - endpoints: ["b:eth1", "br3:e1"]
    - type: veth
      endpoints: [{node: a, interface: eth2}, {node: br3, interface: e2, ipv4: 10.0.0.1/24}]
`, nil, []problem{{6, "topology.nodes.br1.image", "a bridge is a LAN"}, {6, "topology.nodes.br1", "bridge br1 joins 0 nodes"},
			{7, "topology.nodes.br2", "bridge br2 joins 0 nodes"}, {8, "topology.nodes.br3", "bridge br3 joins 1 nodes"},
			{10, "topology.links[0]", "a link between two bridges"}, {11, "topology.links[1].mtu", "one MTU for all"},
			{14, "topology.links[3]", "an address for the bridge's end"}}},
		// Problems the spec layer finds in the converted file, at the containerlab line they come from.
		{"bad interface name", "name: x\ntopology:\n  nodes: {a: {kind: linux}, b: {kind: linux}}\n  links:\n    - endpoints: [\"a:ethernet-1/1\", \"b:eth1\"]\n", nil,
			[]problem{{5, "topology.links[0].endpoints[0]", "characters an interface name cannot have"}}},
		{"unknown endpoint node", "name: x\ntopology:\n  nodes: {a: {kind: linux}}\n  links:\n    - endpoints: [\"a:eth1\",\n                  \"zz:eth1\"]\n", nil,
			[]problem{{6, "topology.links[0].endpoints[1]", "zz"}}},
		{"bind outside the writable directories", fmt.Sprintf(twoNodes, "      binds: [\"f:/usr/lib/f\"]\n"), map[string]string{"f": "x"},
			[]problem{{6, "topology.nodes.a.binds[0]", "not in a node's writable directories"}}},
		{"bad address", "name: x\ntopology:\n  nodes: {a: {kind: linux}, b: {kind: linux}}\n  links:\n    - endpoints: [\"a:eth1\", \"b:eth1\"]\n      ipv4: [10.0.0.300/24]\n", nil,
			[]problem{{6, "topology.links[0].ipv4[0]", "not an address"}}},
		{"bad sysctl", fmt.Sprintf(twoNodes, "      sysctls:\n        kernel.pid_max: 10\n"), nil, []problem{{7, "topology.nodes.a.sysctls.kernel.pid_max", "only net.* sysctls"}}},
		{"bad lab name", "name: my.lab\ntopology:\n  nodes: {a: {kind: linux}}\n", nil, []problem{{1, "name", "not a valid name"}}},
	}
	for key := range refusedNodeKeys {
		tests = append(tests, refusal{"node key " + key, fmt.Sprintf(twoNodes, "      "+key+": x\n"), nil,
			[]problem{{6, "topology.nodes.a." + key, "trellis cannot honour it: " + refusedNodeKeys[key].msg}}})
		tests = append(tests, refusal{"defaults key " + key, "name: x\ntopology:\n  defaults:\n    " + key + ": x\n  nodes: {a: {kind: linux}}\n", nil,
			[]problem{{4, "topology.defaults." + key, "trellis cannot honour it"}}})
	}
	for key := range refusedTopKeys {
		tests = append(tests, refusal{"top key " + key, "name: x\n" + key + ": x\ntopology: {nodes: {a: {kind: linux}}}\n", nil,
			[]problem{{2, key, "trellis cannot honour it: " + refusedTopKeys[key].msg}}})
	}
	for typ := range refusedLinkTypes {
		tests = append(tests, refusal{"link type " + typ, "name: x\ntopology:\n  nodes: {a: {kind: linux}}\n  links:\n    - type: " + typ + "\n", nil,
			[]problem{{5, "topology.links[0].type", "trellis cannot honour link type " + typ + ": " + refusedLinkTypes[typ].msg}}})
	}
	sort.Slice(tests, func(i, j int) bool { return tests[i].name < tests[j].name })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, data := writeLab(t, tt.doc, tt.files)
			n, err := Parse(path, data)
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", n)
			}
			var es spec.Errors
			if !errors.As(err, &es) {
				t.Fatalf("Parse: %v, want spec.Errors", err)
			}
			if len(es) != len(tt.want) {
				t.Fatalf("Parse gave %d problems, want %d:\n%v", len(es), len(tt.want), err)
			}
			for i, w := range tt.want {
				e := es[i]
				if e.File != path || e.Line != w.line || e.Field != w.field || !strings.Contains(e.Msg, w.msg) || e.Fix == "" {
					t.Errorf("problem %d is\n  %v\nwant %s:%d: %s: ...%s... with a fix", i, e, path, w.line, w.field, w.msg)
				}
			}
			// Convert refuses it too, printing nothing.
			if text, _, err := Convert(path, data); err == nil || text != nil {
				t.Errorf("Convert gave %q, %v; want an error and no text", text, err)
			}
		})
	}
}
