//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// A node's mount namespace is a copy of the spawner's base tree (internal/noderuntime/nodeinit,
// base.go): the host's mounts that every node covers with its own (beneath /dev, /proc and /sys,
// and the named network namespaces under /run/netns) are not in it, every mount in it is
// private, and a mount the host makes while the node runs does not reach it. On 5ddc709 each
// node held a locked copy of every host mount (48 mounts per node on a cgroup v1 host, the 11
// cgroup mounts beneath /sys among them).
func TestNodeMounts(t *testing.T) {
	e := start(t)
	host := mountinfo(t, "/proc/self/mountinfo")
	var hidden []string
	for _, m := range host {
		if under(m.target, "/dev", "/sys") {
			hidden = append(hidden, m.target)
		}
	}
	if len(hidden) == 0 {
		t.Fatal("the host has no mount beneath /dev or /sys (not even /dev/pts): this test proves nothing here; run it on a host with devpts mounted")
	}
	mustTrellis(t, e.state, "up", writeTopo(t, fmt.Sprintf(isoTopo, "mounts")))
	pids := inspect(t, e.state, "mounts").pids()
	// What trellis mounts beneath /dev, /proc and /sys in every node (dev.go, proc.go).
	own := []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
		"/dev/pts", "/dev/shm", "/proc/sys", "/proc/sys/net", "/proc/bus", "/proc/fs", "/proc/irq",
		"/proc/kcore", "/proc/kmsg", "/proc/sysrq-trigger", "/proc/timer_list", "/proc/keys",
		"/proc/latency_stats", "/proc/sched_debug", "/proc/acpi", "/proc/scsi", "/proc/sys/kernel/sysrq"}
	check := func(when string) {
		t.Helper()
		for name, pid := range pids {
			mounts := mountinfo(t, fmt.Sprintf("/proc/%d/mountinfo", pid))
			for _, m := range mounts {
				if under(m.target, "/dev", "/proc", "/sys") && !slices.Contains(own, m.target) {
					t.Errorf("%s: node %s has the host's %s mount at %s, which its own /dev, /proc or /sys covers", when, name, m.fstype, m.target)
				}
				if m.target == "/run/netns" || under(m.target, "/run/netns") {
					t.Errorf("%s: node %s has the host's mount at %s, which its /run covers", when, name, m.target)
				}
				if m.propagation != "" {
					t.Errorf("%s: node %s's mount at %s propagates (%s), want private", when, name, m.target, m.propagation)
				}
			}
			// Every superblock a node mounts costs memory in every memory cgroup of the machine
			// (docs/benchmarks.md, deploy notes): the node's own are its private file system
			// (one tmpfs bound at /dev and at each private directory), devpts, /etc's overlay,
			// proc and sysfs; the masked /proc directories are binds.
			checkPrivateFS(t, when, name, mounts)
			sbs := map[string]bool{}
			for _, m := range mounts {
				if !slices.ContainsFunc(host, func(h mountEntry) bool { return h.dev == m.dev }) {
					sbs[m.dev] = true
				}
			}
			if len(sbs) > maxNodeSuperblocks {
				t.Errorf("%s: node %s mounts %d superblocks of its own, want at most %d", when, name, len(sbs), maxNodeSuperblocks)
			}
			t.Logf("%s: node %s has %d mounts (the host %d), %d superblocks of its own", when, name, len(mounts), len(host), len(sbs))
		}
	}
	check("after up")
	// A mount the host makes now, at a shared mount point of its own: a named network
	// namespace under /run/netns (ip makes /run/netns shared), if the host has it shared.
	if i := slices.IndexFunc(host, func(m mountEntry) bool { return m.target == "/run/netns" }); i >= 0 && strings.Contains(host[i].propagation, "shared:") {
		ns := "trtest-mounts-" + nonce()
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v\n%s", ns, err, out)
		}
		defer exec.Command("ip", "netns", "del", ns).Run()
		check("after the host's ip netns add")
	} else {
		t.Log("the host has no shared /run/netns: the propagation of a later host mount is not checked")
	}
	mustTrellis(t, e.state, "down", "mounts")
}

// maxNodeSuperblocks is how many superblocks a node mounts (5ddc709: 12, with an empty tmpfs
// over each masked directory of /proc; 6d36b5a: 11, with a tmpfs for /dev and each private
// directory).
const maxNodeSuperblocks = 5

// privateMounts are the places of a node's private file system, with the mount flags each
// must have beyond nosuid and nodev.
var privateMounts = map[string][]string{"/dev": {"noexec"}, "/dev/shm": nil, "/run": nil, "/tmp": nil,
	"/var/tmp": nil, "/var/log": nil, "/var/lib": nil}

// checkPrivateFS checks that a node's /dev and private directories are one tmpfs, each place
// nosuid and nodev, /dev noexec too, and that none is the root of that file system (each is a
// directory of it bound there).
func checkPrivateFS(t *testing.T, when, node string, mounts []mountEntry) {
	t.Helper()
	devs := map[string]bool{}
	for place, extra := range privateMounts {
		i := -1 // the last mount there, on top of the others (the host's /dev beneath the node's)
		for j, m := range mounts {
			if m.target == place {
				i = j
			}
		}
		if i < 0 {
			t.Errorf("%s: node %s has no mount at %s", when, node, place)
			continue
		}
		m := mounts[i]
		devs[m.dev] = true
		if m.fstype != "tmpfs" || m.root == "/" {
			t.Errorf("%s: node %s's %s is %s's %s, want a directory of its private tmpfs", when, node, place, m.fstype, m.root)
		}
		for _, o := range append([]string{"nosuid", "nodev"}, extra...) {
			if !slices.Contains(m.options, o) {
				t.Errorf("%s: node %s's %s has options %v, want %s", when, node, place, m.options, o)
			}
		}
		if extra == nil && slices.Contains(m.options, "noexec") {
			t.Errorf("%s: node %s's %s is noexec", when, node, place)
		}
	}
	if len(devs) != 1 {
		t.Errorf("%s: node %s's /dev and private directories are %d file systems, want one", when, node, len(devs))
	}
}

// under tells whether path p lies strictly beneath one of dirs.
func under(p string, dirs ...string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

type mountEntry struct {
	dev, root, target, fstype, propagation string
	options                                []string // the mount's (not the superblock's)
}

// mountinfo reads a mountinfo file: each mount's superblock (major:minor), point, type and
// propagation tags (shared:N,
// master:N; "" for a private mount).
func mountinfo(t *testing.T, path string) []mountEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []mountEntry
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, after := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 6 || len(after) < 1 {
			t.Fatalf("%s: unexpected line %q", path, line)
		}
		var tags []string
		for _, o := range f[6:] {
			if strings.HasPrefix(o, "shared:") || strings.HasPrefix(o, "master:") {
				tags = append(tags, o)
			}
		}
		out = append(out, mountEntry{dev: f[2], root: f[3], target: f[4], fstype: after[0], propagation: strings.Join(tags, " "),
			options: strings.Split(f[5], ",")})
	}
	return out
}
