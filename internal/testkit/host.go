package testkit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// Host is what a test may leave behind on the host by mistake, each object as a string that
// says what it is ("link tr0 (veth)", "mount /tmp/x (tmpfs)").
type Host map[string]bool

// cgroupRoot is where the control group hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// Snapshot records the links of the root network namespace, the network namespaces in use (by
// a process, a mount or a descriptor of this process), this process's mounts, the pins under
// /sys/fs/bpf and the control groups: the top ones of every hierarchy (v1 and v2; not deeper,
// where systemd's units come and go), and those under trellis's (cgroup.Parent).
func Snapshot() (Host, error) {
	h := Host{}
	var links []netlink.Link
	var err error
	for i := range 100 { // a dump the kernel interrupted because the list changed is repeated
		if links, err = netlink.LinkList(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
		time.Sleep(time.Duration(i) * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	for _, l := range links {
		h[fmt.Sprintf("link %s (%s)", l.Attrs().Name, l.Type())] = true
	}
	netns, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	fds, _ := filepath.Glob("/proc/self/fd/*")
	for _, p := range append(netns, fds...) {
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, "net:[") {
			h["network namespace "+target] = true
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER
		f := strings.Fields(line)
		if sep := slices.Index(f, "-"); sep >= 5 && sep+1 < len(f) {
			h[fmt.Sprintf("mount %s (%s)", f[4], f[sep+1])] = true
			if f[sep+1] == "nsfs" && strings.HasPrefix(f[3], "net:[") {
				h["network namespace "+f[3]] = true
			}
		}
	}
	_ = filepath.WalkDir("/sys/fs/bpf", func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != "/sys/fs/bpf" {
			h["bpffs pin "+p] = true
		}
		return nil
	})
	hierarchies := []string{cgroupRoot} // v2: one
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.procs")); err != nil {
		hierarchies = subdirs(cgroupRoot) // v1: one mount per controller, under a tmpfs
	}
	for _, top := range hierarchies {
		for _, g := range append(subdirs(top), subdirs(filepath.Join(top, "trellis"))...) {
			h["cgroup "+g] = true
		}
	}
	return h, nil
}

// subdirs lists the directories in dir (none if it cannot be read).
func subdirs(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// Diff lists what after has that before had not ("left: ...") and what it lost ("gone: ..."),
// sorted.
func Diff(before, after Host) []string {
	var out []string
	for k := range after {
		if !before[k] {
			out = append(out, "left: "+k)
		}
	}
	for k := range before {
		if !after[k] {
			out = append(out, "gone: "+k)
		}
	}
	sort.Strings(out)
	return out
}

// settle is how long LeaveHostAsFound waits for the kernel to free what a test closed
// (namespaces and links go with the last reference, a little after it); outside CI, where a
// difference may be someone else's, it waits less.
func settle() time.Duration {
	if InCI() {
		return 10 * time.Second
	}
	return time.Second
}

// maxShown is how many differences LeaveHostAsFound names.
const maxShown = 30

// LeaveHostAsFound snapshots the host now and, when the test ends (after the cleanups
// registered later), checks the host against it. In CI, where one test runs at a time, a
// difference fails the test; on a developer machine, which others may be using, it is logged.
func LeaveHostAsFound(t testing.TB) {
	t.Helper()
	before, err := Snapshot()
	if err != nil {
		t.Fatalf("host snapshot: %v", err)
	}
	t.Cleanup(func() {
		var diff []string
		for end := time.Now().Add(settle()); ; time.Sleep(100 * time.Millisecond) {
			after, err := Snapshot()
			if err != nil {
				t.Errorf("host snapshot: %v", err)
				return
			}
			if diff = Diff(before, after); len(diff) == 0 || time.Now().After(end) {
				break
			}
		}
		if len(diff) == 0 {
			return
		}
		n := len(diff)
		if n > maxShown {
			diff = append(diff[:maxShown], fmt.Sprintf("... and %d more", n-maxShown))
		}
		msg := fmt.Sprintf("the host is not as the test found it (%d differences):\n\t%s", n, strings.Join(diff, "\n\t"))
		if InCI() {
			t.Error(msg)
			return
		}
		t.Logf("%s\n(not failed outside CI: others may be using this machine; %s=1 fails on it)", msg, CIEnv)
	})
}
