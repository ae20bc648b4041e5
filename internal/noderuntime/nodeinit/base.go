package nodeinit

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The nodes' base tree. Every node's mount namespace starts as a copy of one mount namespace
// that the spawner prepares once (prepareBase), instead of a copy of the host's made and
// prepared again for each node: the host's tree, private (no mount of the host propagates into
// it, and nothing of it to the host or another node), read-only but /proc and /sys, and
// without the host's mounts that no node can see (hiddenMount): those beneath /dev, /proc and
// /sys, which every node covers with its own /dev, /proc and /sys, and the named network
// namespaces under /run/netns (one mount each, covered by the node's /run). Each of them was
// copied into every node's namespace, where the kernel kept it, locked, for the node's life
// (16 of a node's 48 mounts on a host with cgroup v1).

// hiddenMount tells whether the host's mount at target (absolute, clean) is one that no node
// sees and the base tree leaves out. Nothing that may hold a node's root file system
// (Config.Rootfs) is left out.
func hiddenMount(target string) bool {
	for _, p := range []string{"/dev/", "/proc/", "/sys/", "/run/netns/"} {
		if strings.HasPrefix(target, p) {
			return true
		}
	}
	return target == "/run/netns"
}

// prepareBase makes the base tree in a new mount namespace, on a thread of its own that ends
// once it is made, and returns a descriptor of that namespace (nsfs), which keeps it.
func prepareBase() (int, error) {
	type result struct {
		fd  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, in the base namespace, goes with it
		fd, err := makeBase()
		done <- result{fd, err}
	}()
	r := <-done
	if r.err != nil {
		return -1, fmt.Errorf("the nodes' base tree: %w", r.err)
	}
	return r.fd, nil
}

// makeBase makes the calling thread's mount namespace the base tree (prepareBase).
func makeBase() (int, error) {
	// CLONE_NEWNS unshares the thread's root and working directory too (CLONE_FS).
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return -1, fmt.Errorf("new mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return -1, fmt.Errorf("making mounts private: %w", err)
	}
	hidden, err := hiddenMounts("/proc/thread-self/mountinfo")
	if err != nil {
		return -1, err
	}
	for _, target := range hidden {
		// Stacked mounts at one place come off one at a time; EINVAL: none left there.
		for unix.Unmount(target, unix.MNT_DETACH) == nil {
		}
	}
	if err := unix.MountSetattr(-1, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return -1, fmt.Errorf("making the host file system read-only: %w", err)
	}
	// /proc and /sys (not what is mounted below them) stay writable: trellis writes the
	// init's uid and gid maps in /proc, and the kernel lets the node mount a /proc or /sys
	// of its own (`ip netns exec` does) only where the host's mount it would reveal is not
	// locked read-only. Their files keep their host owners and modes.
	for _, p := range []string{"/proc", "/sys"} {
		if err := unix.MountSetattr(-1, p, 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return -1, fmt.Errorf("%s: %w", p, err)
		}
	}
	fd, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening the base namespace: %w", err)
	}
	return fd, nil
}

// hiddenMounts lists the mount points of a mountinfo file that hiddenMount leaves out, the
// outermost of each subtree only (detaching it detaches what is beneath), shortest first.
func hiddenMounts(mountinfo string) ([]string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var all []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if t := unescapeMountinfo(fields[4]); hiddenMount(t) {
			all = append(all, t)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", mountinfo, err)
	}
	sort.Slice(all, func(i, j int) bool { return len(all[i]) < len(all[j]) })
	var out []string
	for _, t := range all {
		if !slices.ContainsFunc(out, func(o string) bool { return t == o || strings.HasPrefix(t, o+"/") }) {
			out = append(out, t)
		}
	}
	return out, nil
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space, \011, \012, \134).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
