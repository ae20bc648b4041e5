//go:build integration

package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/trellisnet/trellis/internal/testkit"
)

// TestPlaceFillsEmptyCpuset: a v1 cpuset group left without cores (as a fresh group is when
// its parent does not pass its own on) still takes a process: Place gives it its parent's
// cores and memory nodes.
func TestPlaceFillsEmptyCpuset(t *testing.T) {
	h, err := Detect()
	if err != nil {
		testkit.Skipf(t, "%v: the test needs a cgroup hierarchy (v1 or v2) mounted", err)
	}
	name := fmt.Sprintf("placetest-%d", os.Getpid())
	g, err := h.Create(name, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	dir, ok := g.dirs["cpuset"]
	if !ok {
		testkit.Skip(t, "no v1 cpuset hierarchy on this host: the test is for a v1 cpuset group (a host with cgroup v1 has one)")
	}
	if err := write(dir, "cpuset.cpus", "\n"); err != nil { // an empty write is none
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if err := g.Place(cmd.Process.Pid); err != nil {
		t.Fatalf("Place into a cpuset without cores: %v", err)
	}
	got, _ := read(dir, "cpuset.cpus")
	want, _ := read(h.dirs(name)["cpuset"]+"/..", "cpuset.cpus")
	if got == "" || got != want {
		t.Errorf("the group's cores are %q; want its parent's %q", got, want)
	}
}
