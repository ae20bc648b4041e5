package nodeinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// A node's private file system is one tmpfs, owned by the node's root and mounted nowhere,
// whose directories are bound at their places: /dev (dev.go), /run, /tmp, /var/tmp, /var/log,
// /var/lib and /dev/shm. One superblock for all of them, not one each: every superblock a node
// mounts has a shrinker of its own, and every memory cgroup of the machine keeps a counter per
// shrinker (the kernel's per-cgroup shrinker info, kmalloc'd in units of 64 shrinkers), so that
// each superblock of each node costs memory in every node's memory cgroup: the kernel memory
// per node grew with the number of nodes on the machine (docs/benchmarks.md, deploy notes).
// The directories share the file system's size (Config.TmpfsSize); its pages count in the
// node's memory cgroup. A bind keeps the node inside its directory: `..` at a mount's root
// stays there, and a link or rename between two places fails (EXDEV), as it did between two
// file systems.

// DefaultTmpfsSize is the size of a node's private file system (all its private directories
// and /dev together) when Config gives none (a node without a memory limit).
const DefaultTmpfsSize = 256 << 20

// PrivateDirs are the private directories of every node, empty at its start, owned by its root;
// with /etc (an overlay, see EtcTemplate) and /dev they are the only writable places. /var/run
// is a link to /run on Debian. Name is the directory's name in the private file system.
var PrivateDirs = []struct {
	Path string
	Mode uint32
	Name string
}{
	{"/run", 0o755, "run"}, {"/tmp", 0o1777, "tmp"}, {"/var/tmp", 0o1777, "var-tmp"},
	{"/var/log", 0o755, "var-log"}, {"/var/lib", 0o755, "var-lib"}, {"/dev/shm", 0o1777, "shm"},
}

// devDir is the private file system's directory bound at the node's /dev.
const devDir = "dev"

// privateFS is a node's private file system, mounted nowhere (fd, a detached mount).
type privateFS struct{ fd int }

// newPrivateFS makes the node's private file system: a tmpfs of size bytes (0: the default),
// nosuid and nodev, its directories made and owned by the node's root (host uid base).
func newPrivateFS(size uint64, base uint32) (*privateFS, error) {
	if size == 0 {
		size = DefaultTmpfsSize
	}
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("tmpfs: %w", err)
	}
	defer unix.Close(fsfd)
	id := strconv.FormatUint(uint64(base), 10)
	for _, o := range [][2]string{{"size", strconv.FormatUint(size, 10)}, {"mode", "0755"}, {"uid", id}, {"gid", id}} {
		if err := unix.FsconfigSetString(fsfd, o[0], o[1]); err != nil {
			return nil, fmt.Errorf("tmpfs %s=%s: %w", o[0], o[1], err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("tmpfs: %w", err)
	}
	fd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, fmt.Errorf("tmpfs: %w", err)
	}
	p := &privateFS{fd: fd}
	dirs := map[string]uint32{devDir: 0o755}
	for _, d := range PrivateDirs {
		dirs[d.Name] = d.Mode
	}
	for name, mode := range dirs {
		err := unix.Mkdirat(fd, name, 0o700)
		if err == nil {
			err = unix.Fchownat(fd, name, int(base), int(base), unix.AT_SYMLINK_NOFOLLOW)
		}
		if err == nil { // after chown; and the umask left out
			err = unix.Fchmodat(fd, name, mode, 0)
		}
		if err != nil {
			p.close()
			return nil, fmt.Errorf("tmpfs %s: %w", name, err)
		}
	}
	return p, nil
}

func (p *privateFS) close() { unix.Close(p.fd) }

// attach mounts the file system at the node's /run (in the tree whose root is root) if this
// kernel cannot clone a directory of a mount attached nowhere: before Linux 6.15 open_tree
// refuses to (EINVAL; Debian 12's 6.1). Its directories are then cloned from there, and /run's
// own directory is bound over it (mountDirs), hiding it: the node's mounts are locked, so its
// root cannot take that bind away, and what is beneath is its own directories anyway. On newer
// kernels it stays attached nowhere.
func (p *privateFS) attach(root string) error {
	fd, err := unix.OpenTree(p.fd, devDir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err == nil {
		unix.Close(fd)
		return nil
	}
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	target, done, err := mountPoint(root, "/run")
	if err != nil {
		return fmt.Errorf("/run, where this kernel needs it attached: %w", err)
	}
	defer done()
	return unix.MoveMount(p.fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_SYMLINKS)
}

// bind binds the file system's directory name at target (a path, or /proc/self/fd/N:
// mountPoint), with attr added to the file system's flags.
func (p *privateFS) bind(name, target string, attr uint64) error {
	fd, err := unix.OpenTree(p.fd, name, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if attr != 0 {
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: attr}); err != nil {
			return err
		}
	}
	// T_SYMLINKS: target is followed as mount(2) follows it (/proc/self/fd/N, a magic link).
	return unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_SYMLINKS)
}

// mountDirs binds the private directories at their places in the tree whose root is root
// (after /dev, which holds /dev/shm), and makes ReadyFile, owned by host root: the node
// cannot mark itself ready.
func (p *privateFS) mountDirs(root string) error {
	for _, d := range PrivateDirs {
		target, done, err := mountPoint(root, d.Path)
		if errors.Is(err, errSkip) {
			continue // the host (or rootfs) lacks it: nothing to hide
		}
		if err != nil {
			return err
		}
		err = p.bind(d.Name, target, 0)
		done()
		if err != nil {
			return fmt.Errorf("%s: %w", d.Path, err)
		}
	}
	ready := filepath.Join(root, ReadyFile)
	if err := os.MkdirAll(filepath.Dir(ready), 0o755); err != nil {
		return err
	}
	// What the init binds over the masked directories of /proc: empty, and host root's, which
	// the node's root cannot write into (its uid is not mapped in the node).
	empty := filepath.Join(root, emptyDir)
	if err := os.Mkdir(empty, 0o555); err != nil {
		return err
	}
	if err := os.Chmod(empty, 0o555); err != nil {
		return err
	}
	return os.WriteFile(ready, nil, 0o600) // empty: not ready (MarkReady)
}
