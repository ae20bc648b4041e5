package spec

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestImage(t *testing.T) {
	dir := t.TempDir()
	makeRoot(t, filepath.Join(dir, "root"), true)
	topo := filepath.Join(dir, "topo.yaml")
	head := "name: t\nnodes:\n  r1:\n"
	cases := []struct {
		name, body string
		want       string // the node's Image; "" with err
		err        string
	}{
		{"a registry reference", "    image: 127.0.0.1:5000/lab/pc:1\n", "127.0.0.1:5000/lab/pc:1", ""},
		{"a Docker Hub name", "    image: frrouting/frr:v8.4.0\n", "frrouting/frr:v8.4.0", ""},
		{"not a reference", "    image: 'Bad Name!'\n", "",
			topo + `:4: nodes.r1.image: "Bad Name!" is not an image reference`},
		{"with rootfs", "    rootfs: root\n    image: alpine:3\n", "",
			topo + ":5: nodes.r1.image: both image: and rootfs: give the node's root file system; keep one"},
		{"on a vm", "    kind: vm\n    image: alpine:3\n", "",
			topo + ":5: nodes.r1.image: a vm node boots its own disk, not a container image"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := Parse(topo, []byte(head+c.body))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v\nwant %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := n.Nodes[0].Image; got != c.want {
				t.Errorf("image %q, want %q", got, c.want)
			}
		})
	}
	_, err := ParseCluster(topo, []byte(head+"    image: alpine:3\n"), nil)
	if err == nil || !strings.Contains(err.Error(), ":4: nodes.r1.image: container images are not yet pulled by a cluster's agents") {
		t.Errorf("in a cluster: %v", err)
	}
	_, err = ParseSent(topo, []byte(head+"    image: alpine:3\n"), false)
	if err == nil || !strings.Contains(err.Error(), ":4: nodes.r1.image: a file sent to the API may not name an image") {
		t.Errorf("sent to the API: %v", err)
	}
}
