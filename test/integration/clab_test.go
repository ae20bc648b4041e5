//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// clabLab is a containerlab topology file: two kind linux nodes without an image (they run the
// host's programs), a bind, a label, exec inherited from the kind and the node's own, a brief link with
// an address for one end. %s is the lab's name.
const clabLab = `name: %s
topology:
  kinds:
    linux:
      exec: ["ip link set eth1 up"]
  nodes:
    a:
      kind: linux
      binds: ["conf/hello.txt:/etc/hello.txt:ro"]
      labels: {lab-role: edge}
      exec: ["ip addr add 198.18.7.1/30 dev eth1", "echo $CLAB_LABEL_LAB_ROLE > /tmp/role"]
    b:
      kind: linux
  links:
    - endpoints: ["a:eth1", "b:eth1"]
      ipv4: ["", 198.18.7.2/30]
`

// TestClabUpPingDown: `trellis diff`, `up` and `down` take a containerlab file: the nodes come
// up with the bound file and the exec of the file, ping each other over the link, a second up
// changes nothing, a file with a key trellis cannot honour is refused at its line with nothing
// created, and down by the file's path removes everything.
func TestClabUpPingDown(t *testing.T) {
	e := start(t)
	name := "clab" + nonce()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "conf", "hello.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "lab.clab.yml")
	rewriteTopo(t, path, fmt.Sprintf(clabLab, name))

	diff := mustTrellis(t, e.state, "diff", path)
	for _, want := range []string{"+ node a", "+ node b", "+ link a:eth1--b:eth1"} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff said\n%s\nwant a line %q", diff, want)
		}
	}
	if out := mustTrellis(t, e.state, "up", path); !strings.Contains(out, "network "+name+" is up: 2 nodes, 1 links") {
		t.Errorf("up said %q, want the network up with 2 nodes and 1 links", out)
	}
	ping(t, e.state, name, "a", "198.18.7.2")
	ping(t, e.state, name, "b", "198.18.7.1")
	if got := mustExec(t, e.state, name, "a", "cat", "/etc/hello.txt"); got != "from the host\n" {
		t.Errorf("a's /etc/hello.txt holds %q, want the host file's text", got)
	}
	// A label is an env: variable of the node's exec, as in containerlab.
	if got := mustExec(t, e.state, name, "a", "cat", "/tmp/role"); got != "edge\n" {
		t.Errorf("a's exec saw CLAB_LABEL_LAB_ROLE=%q, want edge", got)
	}
	if out := mustTrellis(t, e.state, "up", path); !strings.Contains(out, "is up to date: nothing changed") {
		t.Errorf("the second up said %q, want nothing changed", out)
	}

	bad := filepath.Join(dir, "bad.clab.yml")
	rewriteTopo(t, bad, "name: "+name+"x\ntopology:\n  nodes:\n    a:\n      kind: linux\n      mgmt-ipv4: 172.20.20.2\n")
	_, errOut, err := trellis(t, e.state, "up", bad)
	if err == nil || !strings.Contains(errOut, bad+":6: topology.nodes.a.mgmt-ipv4: trellis cannot honour it") {
		t.Errorf("up of a file with mgmt-ipv4: %v\n%s\nwant it refused at %s:6", err, errOut, bad)
	}
	if got := listNetworks(t, e.state); !slices.Equal(got, []string{name}) {
		t.Errorf("ls lists %v, want only %s", got, name)
	}

	if out := mustTrellis(t, e.state, "down", path); !strings.Contains(out, "network "+name+" is down") {
		t.Errorf("down %s said %q, want network %s is down", path, out, name)
	}
	e.assertClean()
}
