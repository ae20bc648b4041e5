package vm

import (
	"strings"
	"testing"

	"github.com/trellisnet/trellis/internal/spec"
)

// TestWantsFRR tells the nodes whose image must hold FRR from their exec and files.
func TestWantsFRR(t *testing.T) {
	cases := []struct {
		name string
		node spec.Node
		want bool
	}{
		{"nothing", spec.Node{}, false},
		{"BIRD", spec.Node{Exec: []string{"bird -c /etc/bird/bird.conf"}, Files: []spec.File{{Path: "/etc/bird/bird.conf", Content: "router id 1.1.1.1;"}}}, false},
		{"frrinit.sh", spec.Node{Exec: []string{"/usr/lib/frr/frrinit.sh start"}}, true},
		{"vtysh", spec.Node{Exec: []string{"VTYSH -b"}}, true},
		{"a file in /etc/frr", spec.Node{Files: []spec.File{{Path: "/etc/frr/frr.conf"}}}, true},
		{"a file of user frr", spec.Node{Files: []spec.File{{Path: "/var/log/x.log", Owner: "frr:frr"}}}, true},
		{"frr only in a file's content", spec.Node{Files: []spec.File{{Path: "/etc/motd", Content: "no frr here"}}}, false},
	}
	for _, c := range cases {
		if got := wantsFRR(&c.node); got != c.want {
			t.Errorf("%s: wantsFRR = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestCheckImageMemory wants enough memory for trellis's image, more for one that holds FRR,
// and none of a node that boots its own initrd.
func TestCheckImageMemory(t *testing.T) {
	hostMemory = func() uint64 { return 4 << 30 }
	const head = "name: n\nnodes:\n  v:\n    kind: vm\n"
	cases := []struct {
		name, body, want string
	}{
		{"FRR in 384M", "    memory: 384M\n    exec: [/usr/lib/frr/frrinit.sh start]\n", ""},
		{"FRR in 320M", "    memory: 320M\n    exec: [/usr/lib/frr/frrinit.sh start]\n",
			"t.yaml:5: nodes.v.memory: 320 MiB is too little for a VM node that runs FRR; give a VM with FRR at least 384M (its image is 20 MB larger)"},
		{"BIRD in 320M", "    memory: 320M\n    exec: [bird]\n", ""},
		{"trellis's image in 256M", "    memory: 256M\n", "t.yaml:5: nodes.v.memory: 256 MiB is too little for a VM node; give a VM at least 320M"},
		{"own initrd in 256M", "    memory: 256M\n    vm: {kernel: /proc/self/exe, initrd: /proc/self/exe}\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := spec.Parse("t.yaml", []byte(head+c.body))
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
