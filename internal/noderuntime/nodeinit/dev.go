package nodeinit

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// A node's /dev is its own (mountDev): a directory of the node's private file system
// (privatefs.go), noexec, that holds the few device files programs
// expect, bound from the host's (a user namespace cannot make device files, so they are bound,
// as runc does for rootless containers), the usual links, /dev/shm (a private directory) and a
// devpts instance of the node's own at /dev/pts, where the node's pseudo-terminals are made.
// No other device of the host (disks, consoles, /dev/kvm...) has a path in the node, and the
// node cannot use up the host's pseudo-terminals: the kernel keeps kernel.pty.reserve of them
// (1024 by default) for the host's own devpts instance, whatever the other instances hold.

// devices are the host's device files bound, read-only (the devices stay writable), into
// every node's /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// devLinks are the symbolic links of a node's /dev: name and target.
var devLinks = [][2]string{
	{"ptmx", "pts/ptmx"}, {"fd", "/proc/self/fd"},
	{"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"},
}

// MaxPTYs is how many pseudo-terminals a node may have at once (its devpts instance's max).
const MaxPTYs = 256

// ttyGID is the gid of the tty group in Debian's /etc/group: the group of the node's ptys.
const ttyGID = 5

// mountDev mounts the node's /dev, the directory devDir of fs, in the tree whose root is root;
// its pseudo-terminals belong to the node's root (host uid base).
func mountDev(root string, fs *privateFS, base uint32) error {
	// The host's devices, cloned (detached bind mounts) before the node's /dev covers them.
	var trees []int
	defer func() { closeAll(trees) }()
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NOEXEC}
	for _, d := range devices {
		fd, err := unix.OpenTree(unix.AT_FDCWD, "/dev/"+d, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("the host's /dev/%s: %w", d, err)
		}
		trees = append(trees, fd)
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
			return fmt.Errorf("the host's /dev/%s: %w", d, err)
		}
	}
	target, done, err := mountPoint(root, "/dev")
	if err != nil {
		return err
	}
	err = fs.bind(devDir, target, unix.MOUNT_ATTR_NOEXEC)
	done()
	if err != nil {
		return err
	}
	dev, err := openDir(root, "/dev") // the node's now
	if err != nil {
		return err
	}
	defer unix.Close(dev)
	if err := fillDev(dev, trees); err != nil {
		return err
	}
	pts, err := unix.Openat(dev, "pts", unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(pts)
	opts := fmt.Sprintf("newinstance,ptmxmode=0666,mode=0620,gid=%d,max=%d", base+ttyGID, MaxPTYs)
	if err := unix.Mount("devpts", fmt.Sprintf("/proc/self/fd/%d", pts), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("/dev/pts: %w", err)
	}
	return nil
}

// fillDev makes the entries of the node's /dev (directory dev), binding trees (the host's
// devices, cloned) on theirs.
func fillDev(dev int, trees []int) error {
	for _, d := range []string{"pts", "shm"} {
		if err := unix.Mkdirat(dev, d, 0o755); err != nil {
			return fmt.Errorf("/dev/%s: %w", d, err)
		}
	}
	for i, d := range devices {
		fd, err := unix.Openat(dev, d, unix.O_CREAT|unix.O_EXCL|unix.O_RDONLY|unix.O_CLOEXEC, 0o666)
		if err != nil {
			return fmt.Errorf("/dev/%s: %w", d, err)
		}
		unix.Close(fd)
		if err := unix.MoveMount(trees[i], "", dev, d, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("/dev/%s: %w", d, err)
		}
	}
	for _, l := range devLinks {
		if err := unix.Symlinkat(l[1], dev, l[0]); err != nil {
			return fmt.Errorf("/dev/%s: %w", l[0], err)
		}
	}
	return nil
}
