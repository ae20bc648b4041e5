//go:build integration

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/trellisnet/trellis/internal/testkit"
)

// TestKeptFilesOfRemovedGroup: a group whose files Stats keeps open is removed behind the
// cache's back (as by another process): the removal works, the next Stats fails as for a
// group that is not there and keeps nothing of it, and a group made again under the same name
// is read through new descriptors. Remove closes them.
func TestKeptFilesOfRemovedGroup(t *testing.T) {
	h, err := Detect()
	if err != nil {
		testkit.Skipf(t, "%v: the test needs a cgroup hierarchy (v1 or v2) mounted", err)
	}
	name := fmt.Sprintf("fdtest-%d", os.Getpid())
	g, err := h.Create(name, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	if _, err := g.Stats(); err != nil {
		t.Fatal(err)
	}
	if files.open() == 0 {
		t.Fatal("Stats kept no descriptor")
	}
	for _, dir := range g.dirs { // removed behind the cache's back
		if err := syscall.Rmdir(dir); err != nil {
			t.Fatalf("rmdir %s with its files kept open: %v", dir, err)
		}
	}
	if _, err := g.Stats(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stats of the removed group: %v, want not exist", err)
	}
	for _, dir := range g.dirs {
		for path := range files.files {
			if len(path) > len(dir) && path[:len(dir)] == dir {
				t.Errorf("%s still kept after its group went", path)
			}
		}
	}
	if g, err = h.Create(name, Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Stats(); err != nil {
		t.Errorf("Stats of the group made again: %v", err)
	}
	before := files.open()
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if files.open() >= before {
		t.Errorf("Remove left the group's descriptors: %d kept, %d before", files.open(), before)
	}
}
