//go:build integration

package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
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
	g, err := h.Create(name, Limits{Cpuset: "0"}) // without a cpuset limit a v1 group has no cpuset

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

// TestNoCpusetWithoutLimit: on cgroup v1, a group without a cpuset limit has no cpuset
// directory (dropCpuset: each one made costs a walk over all its siblings, every node of the
// machine), and its process stays in the cpuset it was in; a group with a cpuset limit has
// one, with those cores. On 5ddc709 every group had a cpuset directory.
func TestNoCpusetWithoutLimit(t *testing.T) {
	h, err := Detect()
	if err != nil {
		testkit.Skipf(t, "%v: the test needs a cgroup hierarchy (v1 or v2) mounted", err)
	}
	if h.Version() != 1 {
		t.Skip("cgroup v2: a group is one directory, and a v2 cpuset child does not walk its siblings")
	}
	for _, tc := range []struct {
		cpuset   string
		wantDir  bool
		wantCPUs string
	}{{"", false, ""}, {"0", true, "0"}} {
		name := fmt.Sprintf("cpusettest-%d", os.Getpid())
		g, err := h.Create(name, Limits{Cpuset: tc.cpuset})
		if err != nil {
			t.Fatal(err)
		}
		dir := h.dirs(name)["cpuset"]
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		err = g.Place(cmd.Process.Pid)
		cgroups, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
		cmd.Process.Kill()
		cmd.Wait()
		if err != nil {
			t.Fatalf("cpuset %q: Place: %v", tc.cpuset, err)
		}
		_, statErr := os.Stat(dir)
		if got := statErr == nil; got != tc.wantDir {
			t.Errorf("cpuset %q: the group's cpuset directory %s exists: %v, want %v", tc.cpuset, dir, got, tc.wantDir)
		}
		inGroup := strings.Contains(string(cgroups), "cpuset:/"+Parent+"/"+name+"\n")
		if inGroup != tc.wantDir {
			t.Errorf("cpuset %q: the process is in the group's cpuset: %v, want %v; its groups:\n%s", tc.cpuset, inGroup, tc.wantDir, cgroups)
		}
		if tc.wantDir {
			if got, _ := read(dir, "cpuset.cpus"); got != tc.wantCPUs {
				t.Errorf("cpuset %q: the group's cores are %q", tc.cpuset, got)
			}
		}
		if err := g.Remove(); err != nil {
			t.Fatal(err)
		}
		if err := h.Open(name).Remove(); err != nil { // what dropCpuset left out, if anything
			t.Fatal(err)
		}
	}
}
