package node

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A node's /etc is an overlay: its lower layer is a copy of the host's /etc made once per
// network and trellis process (an "etc template"), its upper layer is in the node's /run.
// In the copy, a file owned by host uid U (and gid G) below UIDRange is owned by base+U (base+G),
// the network's uids, so that inside every node of the network it belongs to U as on the host
// (bird's files to bird, frr's to frr), with the host's modes. What an unprivileged user may not
// read on the host is left out (/etc/shadow, private keys), unless it belongs to a system
// service's own user (uid 1 to 999, e.g. /etc/frr/daemons, 0640 frr:frr): a node's root is an
// unprivileged uid on the host, and its /etc holds no host secret.
//
// The copy is a tmpfs of its own, mounted nowhere (fsopen, fsmount): only this process's
// descriptor and the overlays of the nodes started from it reach it, nothing of it is on disk,
// and the kernel frees it with the last of them, so that neither `down` nor a crash leaves it
// behind. (On a disk, as in /run/trellis on a host whose /run is not a tmpfs, making the
// 1300 inodes of a copy took 0.4 to 1.5 s of every `up`.)
//
// A node with its own root directory (`rootfs: DIR`) has DIR/etc as the lower layer instead,
// copied the same way (RootfsEtcTemplate), but whole: DIR is the user's, not the host's, and
// its files (its /etc/shadow, its daemons' keys) are the node's. An entry owned by a uid or gid
// beyond UIDRange (e.g. a tree unpacked by a user with subuids) is given to the node's root.

// EtcTemplate returns the path of the etc template of a network whose uids start at base, made
// from the host's /etc (src) unless this process has it already; the path stays valid until
// release is called, which the caller does once the node's overlay is mounted (node.Start).
func EtcTemplate(src string, base uint32) (path string, release func(), err error) {
	return template(src, base, hostOwners)
}

// RootfsEtcTemplate is EtcTemplate for the nodes whose root is rootfs: a copy of rootfs/etc.
func RootfsEtcTemplate(rootfs string, base uint32) (path string, release func(), err error) {
	src := filepath.Join(rootfs, "etc")
	if fi, err := os.Lstat(src); err != nil || !fi.IsDir() {
		return "", nil, fmt.Errorf("%w: %s is not a directory", ErrRootfs, src)
	}
	return template(src, base, rootfsOwners)
}

// ErrRootfs is returned when a node's root directory cannot serve.
var ErrRootfs = errors.New("node root directory")

// owners says whether an entry of a copied /etc goes into the nodes, and which of the node's
// uid and gid own it there.
type owners func(mode fs.FileMode, uid, gid uint32) (nuid, ngid uint32, ok bool)

// hostOwners: the host's /etc without its secrets, owners kept (copied).
func hostOwners(mode fs.FileMode, uid, gid uint32) (uint32, uint32, bool) {
	return uid, gid, copied(mode, uid, gid)
}

// rootfsOwners: all of a rootfs's /etc, owners beyond the node's range given to its root.
func rootfsOwners(_ fs.FileMode, uid, gid uint32) (uint32, uint32, bool) {
	if uid >= UIDRange {
		uid = 0
	}
	if gid >= UIDRange {
		gid = 0
	}
	return uid, gid, true
}

// templates are the etc templates this process holds, by source and uid base.
var templates = struct {
	sync.Mutex
	m map[templateKey]*heldTemplate
}{m: map[templateKey]*heldTemplate{}}

type templateKey struct {
	src  string
	base uint32
}

type heldTemplate struct {
	root  *os.File // the tmpfs, mounted nowhere
	users int      // callers that have not released it
	used  time.Time
}

// templateIdle is how long a template nobody uses is kept for the next node of its network (a
// `trellis serve` applies many changes): then it is closed, and its nodes keep their copy.
const templateIdle = time.Minute

func template(src string, base uint32, own owners) (string, func(), error) {
	templates.Lock() // the nodes of a network start in parallel: one copy is enough
	defer templates.Unlock()
	now := time.Now()
	for k, t := range templates.m {
		if t.users == 0 && now.Sub(t.used) > templateIdle {
			t.root.Close()
			delete(templates.m, k)
		}
	}
	k := templateKey{src, base}
	t := templates.m[k]
	if t == nil {
		root, err := memoryCopy(src, base, own)
		if err != nil {
			return "", nil, fmt.Errorf("copy of %s for the nodes: %w", src, err)
		}
		t = &heldTemplate{root: root}
		templates.m[k] = t
	}
	t.users++
	t.used = now
	release := sync.OnceFunc(func() {
		templates.Lock()
		defer templates.Unlock()
		t.users--
		t.used = time.Now()
	})
	// Another process (the spawner) opens it through this one's descriptor.
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), t.root.Fd()), release, nil
}

// memoryCopy copies src as own says into a new tmpfs mounted nowhere, made read-only once
// filled, and returns its root.
func memoryCopy(src string, base uint32, own owners) (*os.File, error) {
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("tmpfs: %w", err)
	}
	defer unix.Close(fsfd)
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("tmpfs: %w", err)
	}
	fd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return nil, fmt.Errorf("tmpfs: %w", err)
	}
	root := os.NewFile(uintptr(fd), src+" (copy)")
	err = copyTree(src, fmt.Sprintf("/proc/self/fd/%d", fd), base, own)
	if err == nil {
		err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	}
	if err != nil {
		root.Close()
		return nil, err
	}
	return root, nil
}

// copyTree copies what own says of src to dst, owners as own says shifted by base, modes kept.
func copyTree(src, dst string, base uint32, own owners) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != src && errors.Is(err, fs.ErrPermission) {
				return nil
			}
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return nil // gone meanwhile
		}
		st := fi.Sys().(*syscall.Stat_t)
		uid, gid, ok := own(fi.Mode(), st.Uid, st.Gid)
		if !ok && path != src {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if path != src { // dst, the copy's root, is there
			if err := copyEntry(path, to, fi); err != nil || !exists(to) {
				return err
			}
		}
		chown := os.Lchown
		if path == src {
			chown = os.Chown // dst may be a link to the root (/proc/self/fd/N)
		}
		if err := chown(to, int(base+uid), int(base+gid)); err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return os.Chmod(to, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
		}
		return nil
	})
}

// copied says whether an entry of the host's /etc goes into the nodes: it must be owned by
// uids and gids the node maps, and be readable by anyone on the host or belong to a system
// service's user.
func copied(mode fs.FileMode, uid, gid uint32) bool {
	if uid >= UIDRange || gid >= UIDRange {
		return false
	}
	read := fs.FileMode(0o004)
	if mode.IsDir() {
		read |= 0o001
	}
	return mode&fs.ModeSymlink != 0 || mode.Perm()&read == read || (uid > 0 && uid < 1000)
}

// copyEntry copies one directory, symlink or regular file; other files (devices, sockets,
// pipes) are left out.
func copyEntry(from, to string, fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return os.Mkdir(to, 0o700)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(from)
		if err != nil {
			return nil
		}
		return os.Symlink(target, to)
	case fi.Mode().IsRegular():
		in, err := os.Open(from)
		if err != nil {
			return nil // not readable after all: left out
		}
		defer in.Close()
		out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
