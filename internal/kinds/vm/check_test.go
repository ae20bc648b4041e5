package vm

import (
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/spec"
)

func TestCheck(t *testing.T) {
	hostMemory = func() uint64 { return 4 << 30 }
	cases := []struct {
		name, file, want string
	}{
		{"defaults", "name: n\nnodes:\n  v:\n    kind: vm\n", ""},
		{"enough", "name: n\nnodes:\n  v:\n    kind: vm\n    memory: 512M\n", ""},
		{"too little", "name: n\nnodes:\n  v:\n    kind: vm\n    memory: 64M\n", "t.yaml:5: nodes.v.memory: 64 MiB is too little for a VM node; give a VM at least 128M"},
		{"more than the host", "name: n\nnodes:\n  v:\n    kind: vm\n    memory: 8G\n", "t.yaml:5: nodes.v.memory: 8192 MiB is more than this machine has (4096 MiB); give the VM less memory"},
		{"on another host", "name: n\nhosts:\n  m1: {address: 198.18.0.1}\n  m2: {address: 198.18.0.2}\nnodes:\n  v:\n    kind: vm\n    memory: 8G\n    host: m2\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := spec.Parse("t.yaml", []byte(c.file))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Errorf("Parse: %q, want %q", got, c.want)
			}
		})
	}
}
