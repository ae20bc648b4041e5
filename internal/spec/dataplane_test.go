package spec

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestDataplanePort(t *testing.T) {
	tests := []struct {
		ifname string
		port   int
		ok     bool
	}{
		{"eth1", 1, true}, {"swp12", 12, true}, {"eth63", 63, true}, {"7", 7, true},
		{"eth0", 0, false}, {"eth64", 0, false}, {"eth", 0, false}, {"eth1a", 0, false}, {"uplink", 0, false},
	}
	for _, tc := range tests {
		port, ok := DataplanePort(tc.ifname)
		if port != tc.port && tc.ok || ok != tc.ok {
			t.Errorf("DataplanePort(%q) = %d, %v; want %d, %v", tc.ifname, port, ok, tc.port, tc.ok)
		}
	}
}

// dataplaneDoc is a network of s1 (with the lines given) between h1 and h2, on s1's
// interfaces if1 and if2.
func dataplaneDoc(s1, if1, if2 string) string {
	return "name: t\nnodes:\n  h1:\n  h2:\n  s1:\n" + s1 +
		"links:\n  - endpoints: [h1:eth1, s1:" + if1 + "]\n  - endpoints: [s1:" + if2 + ", h2:eth1]\n"
}

func TestParseDataplane(t *testing.T) {
	files := map[string]string{"/topo/sw.c": "int x;", "/topo/sw.o": "\x7fELF"}
	read := func(path string) ([]byte, error) {
		if c, ok := files[path]; ok {
			return []byte(c), nil
		}
		return nil, os.ErrNotExist
	}
	tests := []struct {
		name, s1, if1, if2 string
		want               *Dataplane
		err                string // in the error, with its line
	}{
		{"C", "    dataplane: {program: sw.c}\n", "eth1", "eth2", &Dataplane{Program: "sw.c", Path: "/topo/sw.c", Source: []byte("int x;")}, ""},
		{"object", "    dataplane:\n      program: sw.o\n", "eth1", "eth2", &Dataplane{Program: "sw.o", Path: "/topo/sw.o", Object: true, Source: []byte("\x7fELF")}, ""},
		{"no program", "    dataplane: {}\n", "eth1", "eth2", nil, "6: nodes.s1.dataplane.program: missing"},
		{"unknown key", "    dataplane: {program: sw.c, p4: x}\n", "eth1", "eth2", nil, "nodes.s1.dataplane.p4"},
		{"not C", "    dataplane: {program: sw.p4}\n", "eth1", "eth2", nil, `6: nodes.s1.dataplane.program: "sw.p4" is neither C`},
		{"unreadable", "    dataplane: {program: nope.c}\n", "eth1", "eth2", nil, "6: nodes.s1.dataplane.program: cannot read /topo/nope.c"},
		{"port unnumbered", "    dataplane: {program: sw.c}\n", "uplink", "eth2", nil, "interface uplink of s1"},
		{"same port twice", "    dataplane: {program: sw.c}\n", "eth1", "swp1", nil, "interfaces eth1 and swp1 of s1 are both port 1"},
		{"with engines", "    dataplane: {program: sw.c}\n    engines: 2\n", "eth1", "eth2", nil, "forwards with it, not with engines"},
		{"not a container", "    dataplane: {program: sw.c}\n    kind: vm\n", "eth1", "eth2", nil, "6: nodes.s1.dataplane: a dataplane program needs a node of kind container, not vm; remove dataplane, or the node's kind"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := parse("/topo/t.yaml", []byte(dataplaneDoc(tc.s1, tc.if1, tc.if2)), read)
			if tc.err != "" {
				var errs Errors
				if err == nil || !errors.As(err, &errs) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := n.Node("s1").Dataplane
			if got.Program != tc.want.Program || got.Path != tc.want.Path || got.Object != tc.want.Object || string(got.Source) != string(tc.want.Source) {
				t.Errorf("dataplane = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSentDataplaneReadsNothing(t *testing.T) {
	_, err := ParseSent("t.yaml", []byte(dataplaneDoc("    dataplane: {program: /etc/shadow.c}\n", "eth1", "eth2")), false)
	if err == nil || !strings.Contains(err.Error(), "names a path on the server's machine") {
		t.Fatalf("error = %v, want the path refused", err)
	}
}
