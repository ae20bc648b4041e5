package cgroup

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// cgroupRoot is where the machine's control groups are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// mountMachines makes the machine's control groups visible to this process, which enforces
// nodes' limits with them (a cluster's nodes always have some: docs/cluster.md, "Default
// limits"). trellis run under `ip netns exec`, as the simulated machines of the tests and the
// bench run the agents and the CLI, has a /sys of its own without /sys/fs/cgroup; in such a
// mount namespace of its own, where nothing is mounted at or under /sys/fs/cgroup, it mounts
// there the hierarchies the machine's first process has (v1 or v2: mounted again, they are the
// same hierarchies), and says whether it did. Elsewhere it changes nothing.
func mountMachines() (bool, error) {
	own, err := cgroupMounts("/proc/self/mountinfo")
	if err != nil || len(own) > 0 {
		return false, err // the machine's namespace (or one with cgroups of its own): left as it is
	}
	mounts, err := cgroupMounts("/proc/1/mountinfo")
	if err != nil || len(mounts) == 0 {
		return false, err
	}
	for _, m := range mounts {
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			return false, err
		}
		if err := unix.Mount(m.fstype, m.dir, m.fstype, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, m.data); err != nil {
			return false, fmt.Errorf("mounting the machine's %s on %s in this mount namespace: %w", m.fstype, m.dir, err)
		}
	}
	return true, nil
}

type cgroupMount struct{ dir, fstype, data string }

// cgroupMounts lists the mounts at and under /sys/fs/cgroup of a mountinfo file, in mount
// order: a tmpfs holding v1 hierarchies, the hierarchies (cgroup, cgroup2).
func cgroupMounts(mountinfo string) ([]cgroupMount, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(after) < 3 || (fields[4] != cgroupRoot && !strings.HasPrefix(fields[4], cgroupRoot+"/")) {
			continue
		}
		var opts []string
		for _, o := range strings.Split(after[2], ",") {
			if o != "rw" && o != "ro" && !strings.HasPrefix(o, "size=") && !strings.HasPrefix(o, "nr_inodes=") {
				opts = append(opts, o)
			}
		}
		switch after[0] {
		case "tmpfs", "cgroup", "cgroup2":
			out = append(out, cgroupMount{dir: fields[4], fstype: after[0], data: strings.Join(opts, ",")})
		}
	}
	return out, sc.Err()
}
