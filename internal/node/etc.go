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
)

// A node's /etc is an overlay: its lower layer is a copy of the host's /etc made once per
// network (an "etc template", in the state directory), its upper layer is in the node's /run.
// In the copy, a file owned by host uid U (and gid G) below UIDRange is owned by base+U (base+G),
// the network's uids, so that inside every node of the network it belongs to U as on the host
// (bird's files to bird, frr's to frr), with the host's modes. What an unprivileged user may not
// read on the host is left out (/etc/shadow, private keys), unless it belongs to a system
// service's own user (uid 1 to 999, e.g. /etc/frr/daemons, 0640 frr:frr): a node's root is an
// unprivileged uid on the host, and its /etc holds no host secret.
//
// A node with its own root directory (`rootfs: DIR`) has DIR/etc as the lower layer instead,
// copied the same way once per network and DIR (RootfsEtcTemplate), but whole: DIR is the
// user's, not the host's, and its files (its /etc/shadow, its daemons' keys) are the node's.
// An entry owned by a uid or gid beyond UIDRange (e.g. a tree unpacked by a user with subuids)
// is given to the node's root.

// EtcTemplate makes the etc template of a network whose uids start at base, in dir, unless it
// exists. It builds the copy beside dir and renames it into place, so that a crash never
// leaves half a template.
func EtcTemplate(src, dir string, base uint32) error {
	return template(src, dir, base, hostOwners)
}

// RootfsEtcTemplate makes the etc template of the nodes of a network whose uids start at base
// that have rootfs as their root: a copy of rootfs/etc in dir, unless it exists, made as
// EtcTemplate makes its copy.
func RootfsEtcTemplate(rootfs, dir string, base uint32) error {
	src := filepath.Join(rootfs, "etc")
	if fi, err := os.Lstat(src); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrRootfs, src)
	}
	return template(src, dir, base, rootfsOwners)
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

func template(src, dir string, base uint32, own owners) error {
	etcMu.Lock() // the nodes of a network start in parallel: one copy is enough
	defer etcMu.Unlock()
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp")
	if err != nil {
		return err
	}
	os.Remove(tmp) // copyTree makes it, with src's mode and owner
	err = copyTree(src, tmp, base, own)
	if err == nil {
		err = os.Rename(tmp, dir)
		if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
			err = nil // made by another trellis meanwhile
		}
	}
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("copy of %s for the nodes: %w", src, err)
	}
	return nil
}

var etcMu sync.Mutex

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
		if err := copyEntry(path, to, fi); err != nil || !exists(to) {
			return err
		}
		if err := os.Lchown(to, int(base+uid), int(base+gid)); err != nil {
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
