package image

import (
	"path/filepath"
	"testing"

	"github.com/trellisnet/trellis/internal/testkit"
)

// TestCollectProgram copies a host program with its loader and libraries, and names the
// collection by its content.
func TestCollectProgram(t *testing.T) {
	prog := "/usr/bin/ip"
	testkit.RequireFile(t, prog, "scripts/setup.sh installs iproute2")
	c := &collection{files: map[string]*entry{}}
	if err := c.program(prog); err != nil {
		t.Fatal(err)
	}
	var libc, loader bool
	for p := range c.files {
		switch filepath.Base(p) {
		case "libc.so.6":
			libc = true
		case "ld-linux-x86-64.so.2":
			loader = true
		}
	}
	if !libc || !loader {
		t.Errorf("collected %d files without libc (%v) or the loader (%v)", len(c.files), libc, loader)
	}
	id := c.id()
	c.add(&entry{path: "/etc/x", content: "1"})
	id1 := c.id()
	c.add(&entry{path: "/etc/x", content: "2"})
	if id == id1 || id1 == c.id() {
		t.Errorf("ids %s, %s, %s: want a new id for each change of content", id, id1, c.id())
	}
}
