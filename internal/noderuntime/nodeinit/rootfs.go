package nodeinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A node with its own root file system (Config.Rootfs, the topology's `rootfs: DIR`) sees DIR
// as its /, instead of the host's root: DIR is bound on itself read-only, nosuid and nodev
// (a set-user-ID program in DIR runs with its caller's uid; DIR's device files do not open),
// the host's /proc and /sys are bound into it as they are seen in other nodes, the node's own
// /dev (dev.go), the private directories and /etc are mounted in it as in other nodes
// (mountPrivate), and the setup
// thread's root is moved to DIR (pivot), the host's tree detached: nothing of the host's files
// is left in the node's mount namespace. DIR is the user's: each directory trellis mounts on is
// opened without following symbolic links and without leaving DIR, so that a link in DIR
// cannot make trellis mount over a host path.

// errSkip is returned by mountPoint for a path that is not a directory of the node's tree.
var errSkip = errors.New("no such directory (a symbolic link or a file is not one)")

// mountPoint returns what to mount on for path p (absolute) of the node's tree whose root is
// root: p itself in the host's tree; in a rootfs, the directory opened beneath root without
// following symbolic links, as /proc/self/fd/N, which done closes. errSkip: p is missing.
func mountPoint(root, p string) (string, func(), error) {
	if root == "/" {
		if _, err := os.Stat(p); err != nil {
			return "", nil, errSkip
		}
		return p, func() {}, nil
	}
	fd, err := openDir(root, p)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("/proc/self/fd/%d", fd), func() { unix.Close(fd) }, nil
}

// openDir opens directory p (absolute) of the node's tree whose root is root (O_PATH), beneath
// root without following symbolic links; the mounts on the way are crossed. errSkip: p is
// missing.
func openDir(root, p string) (int, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", root, err)
	}
	defer unix.Close(rfd)
	fd, err := unix.Openat2(rfd, "."+p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	})
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return -1, errSkip
	case err != nil:
		return -1, fmt.Errorf("%s%s: %w", root, p, err)
	}
	return fd, nil
}

// bindRoot binds dir on itself, read-only, nosuid and nodev, with the host's /proc and /sys
// bound into it, read-only as in other nodes (mountPrivate then makes /proc and /sys
// themselves writable at the mount level, as it does for other nodes).
func bindRoot(dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(unix.AT_FDCWD, dir, unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("read-only: %w", err)
	}
	for _, p := range []string{"/proc", "/sys"} {
		target, done, err := mountPoint(dir, p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		err = unix.Mount(p, target, "", unix.MS_BIND|unix.MS_REC, "")
		done()
		if err == nil {
			err = unix.MountSetattr(unix.AT_FDCWD, filepath.Join(dir, p), unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
		}
		if err != nil {
			return fmt.Errorf("binding the host's %s: %w", p, err)
		}
	}
	return nil
}

// pivot makes dir the root of the setup thread's mount namespace and detaches the host's tree
// (pivot_root with the old root stacked on the new, then unmounted).
func pivot(dir string) error {
	if err := unix.Chdir(dir); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host's tree: %w", err)
	}
	return unix.Chdir("/")
}
