package clab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/trellisnet/trellis/internal/kinds/all" // the kinds the converted files name
	"github.com/trellisnet/trellis/internal/spec"
)

// writeLab writes a containerlab file (and the files its binds name, path -> content, made 0640)
// into a new directory and returns the file's path and content.
func writeLab(t *testing.T, doc string, files map[string]string) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, 0o640); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "lab.clab.yml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, []byte(doc)
}

// body is a converted file without its two comment lines.
func body(t *testing.T, text []byte) string {
	t.Helper()
	lines := strings.SplitN(string(text), "\n", 3)
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "# trellis topology converted from containerlab's lab.clab.yml") {
		t.Fatalf("the converted file does not start with its comment:\n%s", text)
	}
	return lines[2]
}

func TestConvert(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		files map[string]string
		want  string
		notes []string // substrings, one per note, in order
	}{{
		name: "two linux nodes without image, a brief link, exec",
		doc: `name: two
topology:
  nodes:
    a:
      kind: linux
      exec:
        - ip addr add 10.0.0.1/24 dev eth1
    b:
      kind: linux
  links:
    - endpoints: ["a:eth1", "b:eth1"]
      mtu: 9000
`,
		want: `name: two
nodes:
  a:
    exec:
      - ip addr add 10.0.0.1/24 dev eth1
  b: {}
links:
  - endpoints:
      - a:eth1
      - b:eth1
    mtu: 9000
`,
	}, {
		name: "inheritance: node > group > kind > defaults; lists merged, maps by key",
		doc: `name: inh
topology:
  defaults:
    kind: linux
    image: img/defaults
    exec: ["echo defaults"]
    env: {A: defaults, B: defaults, C: defaults}
    cpu: 1
  kinds:
    linux:
      image: img/kind
      cmd: kind-cmd
      exec: ["echo kind"]
      env: {B: kind}
      memory: 256M
  groups:
    g:
      image: img/group
      entrypoint: /bin/group
      exec: ["echo group", "echo defaults"]
      env: {C: group}
      sysctls: {net.ipv4.ip_forward: 0}
  nodes:
    n1:
      group: g
      exec: ["echo node"]
      env: {D: node}
      labels: {graph-level: "2"}
      cpu-set: "0"
    n2:
      image: img/node
      cpu: 0.5
`,
		want: `name: inh
nodes:
  n1:
    image: img/group
    entrypoint: /bin/group
    cmd: kind-cmd
    cpu: 1
    memory: 256M
    cpuset: 0
    env:
      A: defaults
      B: kind
      C: group
      CLAB_LABEL_GRAPH_LEVEL: 2
      D: node
    sysctl:
      net.ipv4.ip_forward: 0
    keep-entrypoint: true
    exec:
      - echo defaults
      - echo kind
      - echo group
      - echo node
  n2:
    image: img/node
    cmd: kind-cmd
    cpu: 0.5
    memory: 256M
    env:
      A: defaults
      B: kind
      C: defaults
    keep-entrypoint: true
    exec:
      - echo defaults
      - echo kind
`,
		notes: []string{"7 topology.defaults.env", "12 topology.kinds.linux.cmd", "18 topology.groups.g.image",
			"19 topology.groups.g.entrypoint", "31 topology.nodes.n2.image"},
	}, {
		name: "binds: files beside the lab, a directory, the node's name, a more specific bind replacing one",
		doc: `name: binds
topology:
  groups:
    r:
      kind: linux
      binds:
        - __clabNodeName__/frr.conf:/etc/frr/frr.conf
        - common/daemons:/etc/frr/daemons:ro
  nodes:
    r1:
      group: r
      binds:
        - etc:/etc/extra
    r2:
      group: r
      binds:
        - r2/other.conf:/etc/frr/frr.conf
`,
		files: map[string]string{"r1/frr.conf": "r1", "r2/other.conf": "other", "common/daemons": "zebra=yes",
			"etc/a.conf": "a", "etc/sub/b.conf": "b"},
		want: `name: binds
nodes:
  r1:
    files:
      - path: /etc/extra/a.conf
        source: etc/a.conf
        mode: 0640
      - path: /etc/extra/sub/b.conf
        source: etc/sub/b.conf
        mode: 0640
      - path: /etc/frr/daemons
        source: common/daemons
        mode: 0640
      - path: /etc/frr/frr.conf
        source: r1/frr.conf
        mode: 0640
  r2:
    files:
      - path: /etc/frr/daemons
        source: common/daemons
        mode: 0640
      - path: /etc/frr/frr.conf
        source: r2/other.conf
        mode: 0640
`,
	}, {
		name: "veth links with addresses, brief ipv4 and ipv6 lists, a bridge as a LAN",
		doc: `name: links
topology:
  nodes:
    a: {kind: linux}
    b: {kind: linux}
    c: {kind: linux}
    sw: {kind: bridge}
  links:
    - type: veth
      endpoints:
        - node: a
          interface: eth1
          ipv4: 10.0.0.1/30
          ipv6: fd00::1/64
        - {node: b, interface: eth1, ipv4: 10.0.0.2/30}
    - endpoints: ["b:eth2", "c:eth2"]
      ipv4: ["", 10.0.1.2/24]
      ipv6: [fd01::1/64]
      labels: {purpose: core}
    - endpoints: ["sw:eth1", "a:eth9"]
    - endpoints: ["c:eth9", "sw:eth2"]
`,
		want: `name: links
nodes:
  a:
    addresses:
      eth1:
        - 10.0.0.1/30
        - fd00::1/64
  b:
    addresses:
      eth1:
        - 10.0.0.2/30
      eth2:
        - fd01::1/64
  c:
    addresses:
      eth2:
        - 10.0.1.2/24
links:
  - endpoints:
      - a:eth1
      - b:eth1
  - endpoints:
      - b:eth2
      - c:eth2
    # label purpose: core (containerlab metadata, no meaning in trellis)
  - name: sw
    endpoints:
      - a:eth9
      - c:eth9
`,
	}, {
		name: "values YAML would read otherwise are quoted",
		doc: `name: quote
topology:
  nodes:
    "n":
      kind: linux
      exec: ["echo 'a: b' # c", "yes", "x:"]
      env: {"on": "true"}
`,
		want: `name: quote
nodes:
  "n":
    env:
      "on": "true"
    exec:
      - "echo 'a: b' # c"
      - "yes"
      - "x:"
`,
		notes: []string{"7 topology.nodes.n.env"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, data := writeLab(t, tt.doc, tt.files)
			text, notes, err := Convert(path, data)
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			if got := body(t, text); got != tt.want {
				t.Errorf("Convert gave\n%s\nwant\n%s", got, tt.want)
			}
			checkNotes(t, path, notes, tt.notes)
		})
	}
}

// checkNotes checks Convert's notes: one per expected "LINE FIELD" whose key (FIELD's last
// part) this build's spec does not know, in order. Once trellis has a key (image, after
// container images arrive), its notes go and the converted text stays the same.
func checkNotes(t *testing.T, path string, notes, want []string) {
	t.Helper()
	var exp []string
	for _, w := range want {
		line, field, _ := strings.Cut(w, " ")
		key := field[strings.LastIndex(field, ".")+1:]
		if !specKnows(t, key) {
			exp = append(exp, fmt.Sprintf("%s:%s: %s: this build of trellis has no node key `%s`", path, line, field, key))
		}
	}
	if len(notes) != len(exp) {
		t.Fatalf("notes:\n%s\nwant %d:\n%s", strings.Join(notes, "\n"), len(exp), strings.Join(exp, "\n"))
	}
	for i, n := range notes {
		if !strings.HasPrefix(n, exp[i]) {
			t.Errorf("note %d is %q, want it to start %q", i, n, exp[i])
		}
	}
}

// specKnows tells whether the spec layer of this build has a node key.
func specKnows(t *testing.T, key string) bool {
	value := "x"
	if key == "env" {
		value = "{A: b}"
	}
	_, err := spec.Parse("probe.yaml", []byte("name: probe\nnodes:\n  a:\n    "+key+": "+value+"\n"))
	return err == nil || !strings.Contains(err.Error(), "nodes.a."+key+": unknown key")
}
