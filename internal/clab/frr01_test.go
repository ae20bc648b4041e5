package clab

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// frr01 is containerlab's lab-examples/frr01, copied unmodified (examples/clab/README.md).
const frr01 = "../../examples/clab/frr01/frr01.clab.yml"

// frr01Blob is the git blob id of containerlab's lab-examples/frr01/frr01.clab.yml at commit
// 39ff2b7cc (srl-labs/containerlab): the copy must be that file, byte for byte.
const frr01Blob = "0a72ff4505618460a6b0bea0e96efacb891f1f75"

// TestFrr01Converts: containerlab's frr01 lab, as upstream wrote it, converts to the trellis
// file of testdata/frr01.trellis.yaml (3 FRR routers with their daemons and frr.conf copied in,
// 3 PCs whose exec sets their addresses and routes, 6 links); the only notes are the images,
// until trellis runs images.
func TestFrr01Converts(t *testing.T) {
	data, err := os.ReadFile(frr01)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum([]byte(fmt.Sprintf("blob %d\x00%s", len(data), data)))
	if got := hex.EncodeToString(sum[:]); got != frr01Blob {
		t.Fatalf("%s is not containerlab's file (git blob %s, want %s): keep it unmodified", frr01, got, frr01Blob)
	}
	// A copy whose binds have mode 0644 whatever the checkout's umask made them: the converted
	// file gives each file's mode.
	lab := copyFrr01(t, data)
	text, notes, err := Convert(lab, data)
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	want, err := os.ReadFile("testdata/frr01.trellis.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(text) != string(want) {
		t.Errorf("Convert gave\n%s\nwant testdata/frr01.trellis.yaml:\n%s", text, want)
	}
	checkNotes(t, lab, notes, []string{"7 topology.groups.routers.image", "10 topology.groups.hosts.image"})
	// Parse agrees: the network, or only the notes' problems.
	n, err := Parse(lab, data)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.Contains(line, unsupportedMsg+" `image`") {
				t.Errorf("Parse: %s", line)
			}
		}
		return
	}
	if len(n.Nodes) != 6 || len(n.Links) != 6 || len(n.Node("router2").Files) != 2 {
		t.Errorf("Parse gave %d nodes, %d links, router2 with %d files; want 6, 6, 2", len(n.Nodes), len(n.Links), len(n.Node("router2").Files))
	}
}

// copyFrr01 copies the frr01 lab (its file's content data, and the files it binds) into a new
// directory, every file 0644, and returns the path of the copy's file.
func copyFrr01(t *testing.T, data []byte) string {
	t.Helper()
	dir := t.TempDir()
	for _, r := range []string{"router1", "router2", "router3"} {
		for _, f := range []string{"daemons", "frr.conf"} {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(frr01), r, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(dir, r), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, r, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(dir, r, f), 0o644); err != nil { // whatever the umask
				t.Fatal(err)
			}
		}
	}
	path := filepath.Join(dir, filepath.Base(frr01))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDetect(t *testing.T) {
	for _, tt := range []struct {
		path, data string
		want       bool
	}{
		{"lab.clab.yml", "", true},
		{"dir/lab.clab.yaml", "name: x", true},
		{"lab.yaml", "name: x\ntopology:\n  nodes: {}\n", true},
		{"lab.yaml", "name: x\nnodes:\n  a: {}\n", false},
		{"lab.yaml", "name: [", false},
	} {
		if got := Detect(tt.path, []byte(tt.data)); got != tt.want {
			t.Errorf("Detect(%q, %q) = %v, want %v", tt.path, tt.data, got, tt.want)
		}
	}
}

// TestParseNoImage: a lab of linux nodes without images parses into the network trellis runs:
// the bind's content and mode, exec in order, addresses, the link.
func TestParseNoImage(t *testing.T) {
	path, data := writeLab(t, `name: plain
topology:
  kinds:
    linux:
      exec: ["ip link set eth1 up"]
  nodes:
    a:
      kind: linux
      binds: ["conf/a.conf:/etc/a.conf:ro"]
      exec: ["ip addr add 198.18.0.1/30 dev eth1"]
    b:
      kind: linux
      sysctls: {net.ipv4.ip_forward: 0}
  links:
    - endpoints: ["a:eth1", "b:eth1"]
      ipv4: ["", 198.18.0.2/30]
`, map[string]string{"conf/a.conf": "hello\n"})
	n, err := Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	a, b := n.Node("a"), n.Node("b")
	if n.Name != "plain" || n.File != path || a == nil || b == nil || len(n.Links) != 1 {
		t.Fatalf("Parse gave %+v", n)
	}
	if len(a.Files) != 1 || a.Files[0].Path != "/etc/a.conf" || a.Files[0].Content != "hello\n" || a.Files[0].Mode != 0o640 {
		t.Errorf("node a's files are %+v, want /etc/a.conf with hello and mode 0640", a.Files)
	}
	if want := []string{"ip link set eth1 up", "ip addr add 198.18.0.1/30 dev eth1"}; strings.Join(a.Exec, "|") != strings.Join(want, "|") {
		t.Errorf("node a's exec is %q, want %q", a.Exec, want)
	}
	if got := b.Addresses["eth1"]; len(got) != 1 || got[0] != "198.18.0.2/30" || len(a.Addresses["eth1"]) != 0 {
		t.Errorf("addresses a %v b %v, want none on a and 198.18.0.2/30 on b", a.Addresses, b.Addresses)
	}
	if b.Sysctl["net.ipv4.ip_forward"] != "0" {
		t.Errorf("node b's sysctls are %v, want net.ipv4.ip_forward 0", b.Sysctl)
	}
	if got := n.Links[0].Endpoints; got[0].String() != "a:eth1" || got[1].String() != "b:eth1" {
		t.Errorf("the link's endpoints are %v", got)
	}
	if filepath.Dir(path) == "" {
		t.Fatal("no directory")
	}
}
