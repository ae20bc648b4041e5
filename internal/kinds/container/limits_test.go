package container

import (
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/spec"
)

// Limits this machine cannot honour are refused when the file is read, naming file, line and
// field, before anything is created.
func TestLimitsChecked(t *testing.T) {
	cases := []struct {
		node string
		want string // "" for no error
	}{
		{"a: {cpu: 0.5, memory: 64M, cpuset: \"0\", pids: 100}", ""},
		{"a: {cpuset: \"4095\"}", "topo.yaml:3: nodes.a.cpuset: cpuset \"4095\" names core 4095, which this machine lacks"},
		{"a: {cpu: 4000}", "topo.yaml:3: nodes.a.cpu: cpus 4000, but this machine has"},
		{"a: {memory: 1M}", "topo.yaml:3: nodes.a.memory: 1048576 bytes is too little for a node; give at least 8M"},
	}
	for _, c := range cases {
		_, err := spec.Parse("topo.yaml", []byte("name: t\nnodes:\n  "+c.node+"\n"))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.node, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one containing %q", c.node, err, c.want)
		}
	}
}
