// Package cgroup gives each node a control group with its limits (docs/design.md, decision 2):
// CPU (a CFS quota, a cpuset), memory and processes. It works on cgroup v2 where the host has a
// unified hierarchy with those controllers, and on the v1 controllers (cpu, cpuacct, cpuset,
// memory, pids) otherwise. Every node's group sits under one parent, Parent, named after its
// network, so that what a crash left behind can be found and removed.
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Parent is the group under which trellis makes the nodes' groups, in each hierarchy.
const Parent = "trellis"

// ErrNoCgroups is returned when the host has neither the v2 controllers nor the v1 ones.
var ErrNoCgroups = errors.New("no usable cgroup hierarchy")

// ErrLimit is returned for a limit the host cannot honour.
var ErrLimit = errors.New("limit the host cannot honour")

// v1Controllers are the v1 hierarchies a node's group is made in.
var v1Controllers = []string{"cpu", "cpuacct", "cpuset", "memory", "pids"}

// Hierarchy is where the host's cgroups are: one v2 mount, or one mount per v1 controller.
type Hierarchy struct {
	V2     string            // the unified hierarchy's mount point, when it has the controllers
	Mounts map[string]string // v1: controller -> mount point
}

// Detect finds the host's cgroup hierarchy from /proc/self/mountinfo. In a mount namespace of
// its own without any (under `ip netns exec`), it mounts the machine's first (mountMachines).
func Detect() (*Hierarchy, error) {
	h, err := detect()
	if errors.Is(err, ErrNoCgroups) {
		if mounted, merr := mountMachines(); merr != nil {
			return nil, fmt.Errorf("%w; and %v", err, merr)
		} else if mounted {
			return detect()
		}
	}
	return h, err
}

func detect() (*Hierarchy, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := &Hierarchy{Mounts: map[string]string{}}
	var v2 []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(after) < 3 {
			continue
		}
		switch after[0] {
		case "cgroup2":
			v2 = append(v2, fields[4])
		case "cgroup":
			for _, opt := range strings.Split(after[2], ",") {
				for _, c := range v1Controllers {
					if opt == c && h.Mounts[c] == "" {
						h.Mounts[c] = fields[4]
					}
				}
			}
		}
	}
	for _, m := range v2 {
		data, err := os.ReadFile(filepath.Join(m, "cgroup.controllers"))
		if err == nil && hasAll(strings.Fields(string(data)), "cpu", "cpuset", "memory", "pids") {
			return &Hierarchy{V2: m}, nil
		}
	}
	for _, c := range v1Controllers {
		if h.Mounts[c] == "" {
			return nil, fmt.Errorf("%w: cgroup v2 without the cpu, cpuset, memory and pids controllers, and no v1 %s controller", ErrNoCgroups, c)
		}
	}
	return h, nil
}

func hasAll(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

// Version is 2 or 1.
func (h *Hierarchy) Version() int {
	if h.V2 != "" {
		return 2
	}
	return 1
}

// dirs returns the directories of group name (under Parent) in each hierarchy, by controller
// ("" for v2's one directory).
func (h *Hierarchy) dirs(name string) map[string]string {
	if h.V2 != "" {
		return map[string]string{"": filepath.Join(h.V2, Parent, name)}
	}
	out := map[string]string{}
	for _, c := range v1Controllers {
		out[c] = filepath.Join(h.Mounts[c], Parent, name)
	}
	return out
}

// List returns the names of the groups under Parent that begin with prefix, in any hierarchy.
func (h *Hierarchy) List(prefix string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, d := range h.dirs("") {
		entries, err := os.ReadDir(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) && !seen[e.Name()] {
				seen[e.Name()] = true
				out = append(out, e.Name())
			}
		}
	}
	return out, nil
}

// Sweep kills what is left in, and removes, each group whose name begins with prefix and whose
// rest of the name keep refuses (e.g. a node that no longer runs).
func (h *Hierarchy) Sweep(prefix string, keep func(rest string) bool) error {
	names, err := h.List(prefix)
	if err != nil {
		return err
	}
	return h.SweepNames(names, prefix, keep)
}

// SweepNames is Sweep among the groups names (a listing made earlier), which begin with
// prefix; a group of names that no longer exists is passed over.
func (h *Hierarchy) SweepNames(names []string, prefix string, keep func(rest string) bool) error {
	for _, name := range names {
		if keep(strings.TrimPrefix(name, prefix)) {
			continue
		}
		g := h.Open(name)
		if err := g.Kill(); err != nil {
			return err
		}
		if err := g.Remove(); err != nil {
			return err
		}
	}
	return nil
}

func write(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: %w", filepath.Join(dir, file), err)
	}
	return nil
}

// read reads a group's file with plain system calls: os.ReadFile registers every cgroup file
// (they can be polled) with the runtime's poller and removes it again, which made reading a
// thousand nodes' counters three times slower.
func read(dir, file string) (string, error) {
	path := filepath.Join(dir, file)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var data []byte
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return "", &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return strings.TrimSpace(string(data)), nil
		}
		data = append(data, buf[:n]...)
	}
}
